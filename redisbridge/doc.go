// Package redisbridge is fencer's RESP front end, on tidwall/redcon. It maps
// the native FENCE.* commands, and the Redis commands and Lua scripts that
// Redlock clients send, to calls on the server it is given, through the
// small Locker interface declared here. It knows nothing of Raft.
//
// The Redis side (redis.go, scripts.go, redisson.go, pubsub.go,
// connection.go) makes existing lock clients work unchanged: SET NX and
// friends keep Redis's semantics (or, with Config.RedlockMultiEndpoint, the
// native idempotent ones); no Lua is run, the known lock scripts of
// redsync, node-redlock, redis-py and Redisson are recognised by the SHA1
// of their exact text (scripttexts.go) and performed as server calls; HELLO
// 3 switches a connection to RESP3, and its forwarded commands travel over
// forwarding connections that speak RESP3 too. docs/redlock.md describes
// it for users.
//
// Every handler checks its arguments first and answers with Redis's own error
// wording where Redis has one; a bad request never closes the connection.
// No handler blocks without a deadline: each request runs under
// Config.RequestTimeout, and a waiting acquire under its wait plus that.
// While a request waits, the connection is watched, so that a client that
// hangs up leaves the queue (and a grant made to it is handed back).
package redisbridge
