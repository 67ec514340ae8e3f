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
package rediscompat
