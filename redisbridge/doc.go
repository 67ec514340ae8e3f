// Package redisbridge is fencer's RESP front end, on tidwall/redcon. It maps
// the native FENCE.* commands (and, later, the Redis commands and Lua scripts
// that Redlock clients send) to calls on the server it is given, through the
// small Locker interface declared here. It knows nothing of Raft.
//
// Every handler checks its arguments first and answers with Redis's own error
// wording where Redis has one; a bad request never closes the connection.
// No handler blocks without a deadline: each request runs under
// Config.RequestTimeout, and a waiting acquire under its wait plus that.
// While a request waits, the connection is watched, so that a client that
// hangs up leaves the queue (and a grant made to it is handed back).
package redisbridge
