package client

import (
	"fmt"
	"time"
)

// lockKind is the kind of lock a lease holds, which decides the commands
// that acquire, extend and release it (docs/protocol.md).
type lockKind int32

const (
	// plainLock is a lock: FENCE.ACQUIRE.
	plainLock lockKind = iota
	// readLock and writeLock are the two sides of a read-write lock:
	// FENCE.RLOCK and FENCE.WLOCK.
	readLock
	writeLock
	// permit is a permit of a semaphore: FENCE.SEMACQUIRE.
	permit
	// multiLock is several plain locks taken at once: FENCE.MACQUIRE,
	// MEXTEND, MRELEASE.
	multiLock
)

// grant is a granted acquire.
type grant struct {
	token uint64
	ttl   time.Duration
	sent  time.Time // just before the request that got it was sent
	slot  int       // a permit's
	// rounds are the wait rounds that got it, if it waited: ended with
	// the lease (rounds.follow), or at once if it makes none.
	rounds *rounds
}

// lockReq is an acquire as it is sent: a lock (or a set of them) for owner,
// with a TTL of its own, or under a session.
type lockReq struct {
	kind        lockKind
	name, owner string
	names       []string      // multiLock: every key, name the first
	permits     int           // permit: the semaphore's permits
	ttl         time.Duration // the lease's; under a session, the session's
	session     uint64        // zero: none
	value       string        // plainLock under a session
}

// keys is how many keys the request names.
func (q lockReq) keys() int {
	if q.kind == multiLock {
		return len(q.names)
	}
	return 1
}

// what names the request's lock(s) in errors.
func (q lockReq) what() string {
	if q.kind == multiLock {
		return fmt.Sprintf("%q", q.names)
	}
	return fmt.Sprintf("%q", q.name)
}

// check refuses what the server would refuse anyway, before sending it.
func (q lockReq) check(drift time.Duration) error {
	if err := checkLease(q.name, q.ttl, drift); err != nil {
		return err
	}
	switch q.kind {
	case multiLock:
		for _, n := range q.names {
			if n == "" {
				return fmt.Errorf("%w: empty lock name", ErrInvalidArgument)
			}
		}
	case permit:
		if q.permits < 1 {
			return fmt.Errorf("%w: %d permits: a semaphore needs at least one", ErrInvalidArgument, q.permits)
		}
	}
	return nil
}

// acquireArgs are the request's acquire command, waiting wait if not zero.
func (q lockReq) acquireArgs(wait time.Duration) []any {
	ttl := millis(q.ttl)
	if q.session != 0 {
		ttl = 0
	}
	var args []any
	switch q.kind {
	case readLock:
		args = []any{"FENCE.RLOCK", q.name, q.owner, ttl}
	case writeLock:
		args = []any{"FENCE.WLOCK", q.name, q.owner, ttl}
	case permit:
		args = []any{"FENCE.SEMACQUIRE", q.name, q.owner, ttl, q.permits}
	case multiLock:
		args = append([]any{"FENCE.MACQUIRE", q.owner, ttl, len(q.names)}, anys(q.names)...)
	default:
		args = []any{"FENCE.ACQUIRE", q.name, q.owner, ttl}
	}
	if wait > 0 {
		args = append(args, "WAIT", millis(wait))
	}
	if q.session != 0 {
		args = append(args, "SESSION", q.session)
		if q.value != "" {
			args = append(args, "VALUE", q.value)
		}
	}
	return args
}

// extendArgs are the request's extend command, whose reply counts the keys
// extended.
func (q lockReq) extendArgs() []any {
	if q.kind == multiLock {
		return append([]any{"FENCE.MEXTEND", q.owner, millis(q.ttl), len(q.names)}, anys(q.names)...)
	}
	return []any{"FENCE.EXTEND", q.name, q.owner, millis(q.ttl)}
}

// releaseArgs are the request's release command, whose reply counts the
// keys released.
func (q lockReq) releaseArgs() []any {
	var args []any
	if q.kind == multiLock {
		args = append([]any{"FENCE.MRELEASE", q.owner, len(q.names)}, anys(q.names)...)
	} else {
		args = []any{"FENCE.RELEASE", q.name, q.owner}
	}
	if q.session != 0 {
		args = append(args, "SESSION", q.session)
	}
	return args
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// parseGrant reads the reply to q's acquire: [token, granted-ttl-ms], or
// for a permit [slot, token, granted-ttl-ms], or null; under a session the
// TTL is 0.
func parseGrant(v any, q lockReq, sent time.Time) (grant, bool, error) {
	ttl := q.ttl
	if v == nil {
		return grant{}, false, nil
	}
	cmd := q.acquireArgs(0)[0]
	a, ok := v.([]any)
	slot := int64(0)
	if ok && q.kind == permit {
		ok = len(a) == 3
		if ok {
			slot, ok = a[0].(int64)
			a = a[1:]
		}
		if ok && (slot < 0 || slot >= int64(q.permits)) {
			ok = false
		}
	}
	if !ok || len(a) != 2 {
		return grant{}, false, fmt.Errorf("client: unexpected reply to %s: %v", cmd, v)
	}
	tok, ok1 := a[0].(int64)
	ms, ok2 := a[1].(int64)
	if !ok1 || !ok2 || tok <= 0 || ms < 0 || ms == 0 && q.session == 0 {
		return grant{}, false, fmt.Errorf("client: unexpected reply to %s: %v", cmd, v)
	}
	g := grant{token: uint64(tok), ttl: ttl, sent: sent, slot: int(slot)}
	if q.session == 0 {
		g.ttl = min(ttl, time.Duration(ms)*time.Millisecond)
	}
	return g, true, nil
}
