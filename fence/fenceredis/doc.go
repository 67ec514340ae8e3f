// Package fenceredis makes Redis a fenced store: SET, HSET and DEL that
// carry a fencing token and happen only if it is at least the highest token
// already admitted for the key (the rule of package fence).
//
// Each operation is one Lua script, so Redis runs the check, the write and
// the recording of the new token as one atomic step. The token of a key is
// kept in a companion key, fence:{key} by default (see WithTokenKey), which
// has no expiry and survives DEL: a stale writer cannot recreate a key that a
// newer holder deleted. In Redis Cluster the default companion hashes to the
// key's slot as long as the key has no hash tag of its own; give keys with
// hash tags a WithTokenKey that keeps the tag.
//
// Reads need no token: read with the client directly. Data guarded by a
// read-write lock is the exception: RWStore fences its reads (GET, HGETALL)
// and writes (SET, HSET, DEL) under the read-write rule of
// fence.RWValidator, each one Lua script, with the two tokens it needs in a
// hash at the same companion key.
//
// The fence is only as durable as Redis: a write that Redis acknowledged and
// then lost (a crash without AOF fsync, a failover to a replica that had not
// received it) may take the recorded token with it, and then a stale writer
// would be admitted. Use AOF with appendfsync always, or WAIT, if that
// matters.
package fenceredis
