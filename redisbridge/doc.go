// Package redisbridge is fencer's RESP front end, on tidwall/redcon. It maps
// the native FENCE.* commands, and the Redis commands and Lua scripts that
// Redlock clients send, to calls on the server it is given, through the
// small Locker interface declared here. It knows nothing of Raft.
//
// Layout: bridge.go (the server, the command table, request dispatch),
// config.go (Config and its checks), errors.go (every error reply, with
// the codes of package wire), native.go (FENCE.ACQUIRE and the other
// native lock commands), compat.go (the Redis commands and scripts, run by
// package rediscompat's engine, Lua included, on the node's transactions),
// pubsub.go, connection.go and hangup*.go (connections, RESP3, clients that
// hang up), forward.go and join.go (a follower forwarding to the leader, a
// node joining), admin.go and snapshot.go (cluster administration), auth.go,
// guard.go and limits.go (users, ACL checks, limits). docs/redlock.md
// describes the Redis side for users, docs/protocol.md the native one.
//
// Every handler checks its arguments first and answers with Redis's own error
// wording where Redis has one; a bad request never closes the connection.
// No handler blocks without a deadline: each request runs under
// Config.RequestTimeout, and a waiting acquire under its wait plus that.
// While a request waits, the connection is watched, so that a client that
// hangs up leaves the queue (and a grant made to it is handed back).
package redisbridge
