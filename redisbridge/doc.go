// Package redisbridge is fencer's RESP front end, on tidwall/redcon. It maps
// the native FENCE.* commands, and the Redis commands and Lua scripts that
// Redlock clients send, to calls on the node it is given (Locker: what it
// needs of the node, by concern, each part declared beside the commands
// that use it). It knows nothing of Raft.
//
// Layout:
//
//   - commands.go: the one table of commands (name, arity, flags, keys,
//     handler) that dispatch, the argument count, the access checks and
//     COMMAND read; COMMAND itself.
//   - bridge.go: the server, Locker, request dispatch, forwarding a
//     follower's command to the leader (forward.go: the connections).
//   - native.go: FENCE.ACQUIRE and the other lock commands; session.go:
//     sessions; shared.go: read-write locks, semaphores, several keys;
//     watch.go: FENCE.WATCH.
//   - compat.go: the Redis commands and scripts, run by package
//     rediscompat's engine on the node's transactions.
//   - connection.go, pubsub.go, hangup*.go: connection commands, RESP3,
//     pub/sub, clients that hang up.
//   - admin.go, snapshot.go: cluster administration; join.go: a node
//     joining.
//   - auth.go, guard.go, limits.go: users and access checks, limits.
//   - config.go: Config and its checks; errors.go: every error reply, with
//     the codes of package wire.
//
// docs/redlock.md describes the Redis side for users, docs/protocol.md the
// native one.
//
// Every handler checks its arguments first and answers with Redis's own error
// wording where Redis has one; a bad request never closes the connection.
// No handler blocks without a deadline: each request runs under
// Config.RequestTimeout, and a waiting acquire under its wait plus that.
// While a request waits, the connection is watched, so that a client that
// hangs up leaves the queue (and a grant made to it is handed back).
package redisbridge
