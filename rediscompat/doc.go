// Package rediscompat is fencer's Redis-compatible layer: the Redis commands
// and data types that lock libraries use (strings with TTLs, counters,
// hashes, sorted sets, lists, PUBLISH, TIME) and an embedded Lua 5.1
// interpreter (github.com/yuin/gopher-lua) that runs any script over them, as
// EVAL does in Redis.
//
// Every command and every script is one transaction of the node
// (server.Node.Update): it reads and writes a view of the keyspace (db) that
// the leader works out, and what it wrote is committed as one Raft entry,
// applied only if no key it read changed meanwhile. So a script is atomic as
// in Redis, and a leader change can never leave one half done or run it
// twice. A script that the leader has to work out again after a conflict is
// simply run again from the start: it has no effect outside its view until
// its entry commits (PUBLISH is sent after the commit).
//
// The package knows nothing of RESP framing or connections (redisbridge has
// those) and nothing of Raft (server has that): it declares the one call it
// needs of the node (Node).
//
// Layout:
//
//   - commands.go: the command table (name, arity, flags: write, readonly,
//     noscript, blocking..., key positions, run), which a client's command
//     and a script's redis.call both dispatch through; register adds to it.
//   - engine.go: the Engine (Do, Token, Names, Describe), one transaction
//     per command.
//   - cmd_string.go, cmd_hash.go, cmd_list.go (BLPOP, BRPOP),
//     cmd_set.go, cmd_zset.go, cmd_generic.go (keys, TTLs),
//     cmd_server.go (TIME, PUBLISH, PING...): one method per command.
//   - cmd_scripting.go: EVAL, EVALSHA, SCRIPT and the script cache.
//   - lua.go, luafor.go: the Lua sandbox a script runs in; lua_redis.go:
//     the redis.* table (redis.call, replies to Lua and back); cjson.go,
//     bit.go: the libraries Redis gives scripts.
//   - db.go, value.go: the view of the keyspace a transaction sees, and
//     the encodings of values; reply.go: replies.
//
// Its tests: unit tests beside the code, and testdata/replies, Redis's own
// replies to the differential corpus (integration/testdata/redisdiff),
// which TestRecordedRedisReplies compares fencer's with, offline; make
// redisdiff-record records them again from a real redis-server.
package rediscompat
