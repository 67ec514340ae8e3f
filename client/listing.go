package client

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// LockQuery selects a page of locks (FENCE.LOCKS).
type LockQuery struct {
	// Prefix keeps names that start with it; After, the cursor, names
	// that sort after it ("" from the start; a page's Next for the next).
	Prefix, After string
	// Count is the page's size, 1 to 1000; 0 is the server's default (100).
	Count int
	// Match keeps names that match a glob pattern as KEYS takes.
	Match string
	// Elections keeps only elections: plain locks held under a session.
	Elections bool
}

// LockPage is one page of the lock table, read on the leader at one log
// position. A listing of several pages is not one snapshot.
type LockPage struct {
	Leader   string // the node that answered: Waiters are its queues
	Position uint64
	Next     string // "" after the last page
	Locks    []LockInfo
}

// LockInfo is one key: a lock, a read-write lock, a semaphore, or a value
// of another Redis type.
type LockInfo struct {
	Name string
	// Kind is "lock", "read-write", "semaphore", or "redis-hash",
	// "redis-zset", "redis-list", "redis-set".
	Kind    string
	Permits uint64 // a semaphore's
	Value   string // a lock held under a session: its value (an election's announcement)
	Holders []Holder
	Waiters []Waiter // the leader's current queue, in order
}

// Holder is one grant of a key.
type Holder struct {
	Owner string
	Token uint64
	// Remaining is the time left on the leader's clock; negative for a
	// value stored without a TTL.
	Remaining time.Duration
	Session   uint64
	Mode      string // "", "read", "write" or "permit"
	Slot      int
	// Client is the client that took it, as the leader recorded it; nil
	// if the leader has no record (a grant made under an earlier leader,
	// or by a Redis write or script).
	Client *ClientInfo
}

// ClientInfo identifies a client connection: its user, its address as
// the node it connected to saw it, and its CLIENT SETNAME.
type ClientInfo struct {
	User string `json:"user"`
	Addr string `json:"addr"`
	Name string `json:"name"`
}

// Waiter is one queued acquire.
type Waiter struct {
	Owner   string
	Mode    string
	Permits uint64
	Session uint64
	Keys    int // how many locks it waits for at once
	Waited  time.Duration
}

// Locks returns a page of the lock table. A user limited to a pattern sees
// only the names it allows.
func (c *Client) Locks(ctx context.Context, q LockQuery) (LockPage, error) {
	args := []any{"FENCE.LOCKS"}
	if q.Prefix != "" {
		args = append(args, "PREFIX", q.Prefix)
	}
	if q.After != "" {
		args = append(args, "AFTER", q.After)
	}
	if q.Count != 0 {
		args = append(args, "COUNT", q.Count)
	}
	if q.Match != "" {
		args = append(args, "MATCH", q.Match)
	}
	if q.Elections {
		args = append(args, "ELECTIONS")
	}
	v, _, err := c.exchange(ctx, c.standard(), args...)
	if err != nil {
		return LockPage{}, fmt.Errorf("locks: %w", err)
	}
	bad := fmt.Errorf("client: unexpected reply to FENCE.LOCKS: %v", v)
	top, ok := fields(v)
	rows, ok2 := top["locks"].([]any)
	if !ok || !ok2 {
		return LockPage{}, bad
	}
	p := LockPage{Leader: str(top["leader"]), Position: uint64(num(top["position"])), Next: str(top["next"])}
	for _, r := range rows {
		f, ok := fields(r)
		hs, ok2 := f["holders"].([]any)
		ws, ok3 := f["waiters"].([]any)
		if !ok || !ok2 || !ok3 {
			return LockPage{}, bad
		}
		li := LockInfo{Name: str(f["name"]), Kind: str(f["kind"]), Permits: uint64(num(f["permits"])), Value: str(f["value"])}
		for _, h := range hs {
			hf, ok := fields(h)
			if !ok {
				return LockPage{}, bad
			}
			ho := Holder{Owner: str(hf["owner"]), Token: uint64(num(hf["token"])),
				Remaining: msDuration(num(hf["remaining_ms"])), Session: uint64(num(hf["session"])),
				Mode: str(hf["mode"]), Slot: int(num(hf["slot"]))}
			if cf, ok := fields(hf["client"]); ok {
				ho.Client = &ClientInfo{User: str(cf["user"]), Addr: str(cf["addr"]), Name: str(cf["name"])}
			}
			li.Holders = append(li.Holders, ho)
		}
		for _, w := range ws {
			wf, ok := fields(w)
			if !ok {
				return LockPage{}, bad
			}
			li.Waiters = append(li.Waiters, Waiter{Owner: str(wf["owner"]), Mode: str(wf["mode"]), Permits: uint64(num(wf["permits"])),
				Session: uint64(num(wf["session"])), Keys: int(num(wf["keys"])), Waited: msDuration(num(wf["waited_ms"]))})
		}
		p.Locks = append(p.Locks, li)
	}
	return p, nil
}

// SessionPage is one page of the open sessions, read on the leader.
type SessionPage struct {
	Position uint64
	Next     uint64 // 0 after the last page
	Sessions []SessionInfo
}

// SessionInfo is one open session as a listing shows it.
type SessionInfo struct {
	ID        uint64
	User      string
	TTL       time.Duration
	Remaining time.Duration
	Locks     int      // how many locks it holds
	Names     []string // the first 16 of them
	Taken     uint64   // locks taken from it by others
}

// Sessions returns a page of the open sessions with an ID above after (0:
// from the first); count 0 is the server's default (100). A user limited to
// a pattern sees only its own sessions.
func (c *Client) Sessions(ctx context.Context, after uint64, count int) (SessionPage, error) {
	args := []any{"FENCE.SESSIONS"}
	if after != 0 {
		args = append(args, "AFTER", strconv.FormatUint(after, 10))
	}
	if count != 0 {
		args = append(args, "COUNT", count)
	}
	v, _, err := c.exchange(ctx, c.standard(), args...)
	if err != nil {
		return SessionPage{}, fmt.Errorf("sessions: %w", err)
	}
	bad := fmt.Errorf("client: unexpected reply to FENCE.SESSIONS: %v", v)
	top, ok := fields(v)
	rows, ok2 := top["sessions"].([]any)
	if !ok || !ok2 {
		return SessionPage{}, bad
	}
	p := SessionPage{Position: uint64(num(top["position"])), Next: uint64(num(top["next"]))}
	for _, r := range rows {
		f, ok := fields(r)
		names, ok2 := f["names"].([]any)
		if !ok || !ok2 {
			return SessionPage{}, bad
		}
		s := SessionInfo{ID: uint64(num(f["id"])), User: str(f["user"]), TTL: msDuration(num(f["ttl_ms"])),
			Remaining: msDuration(num(f["remaining_ms"])), Locks: int(num(f["locks"])), Taken: uint64(num(f["taken"]))}
		for _, n := range names {
			s.Names = append(s.Names, str(n))
		}
		p.Sessions = append(p.Sessions, s)
	}
	return p, nil
}
