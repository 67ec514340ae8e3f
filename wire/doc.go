// Package wire is fencer's wire contract for error replies, written once for
// the server (redisbridge writes every error reply through it) and for
// clients (the Go client reads them with it); docs/protocol.md lists the
// same table.
//
// An error reply is a code, its first word, and the text after it:
//
//	-UNCERTAIN outcome unknown: leadership lost while the command was in flight; ...
//	-NOTLEADER node-2 127.0.0.1:7379 this node is not the leader; ...
//
// The code alone says what happened to the command (was anything done?) and
// what a client may do next (retry? where?). The text is for people and may
// change between versions; a client reads nothing from it. A code with
// fields (NOTLEADER, so far) writes them right after the code, one word each,
// before the text, so that strings.Fields splits them off; Format and Parse
// functions here read and write them.
//
// Every error reply fencerd sends starts with one of the codes in Codes. The
// one exception is a Lua script's own error (redis.error_reply, or a table
// with an err field, returned or raised): it keeps the first word the
// script gave it, as in Redis.
package wire
