package fsm

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// Apply applies a committed entry and returns its *Result, or for an entry
// that holds a batch of commands a []*Result, one for each in order. Log
// entries that are not commands are answered with nil.
//
// The commands of a batch are applied one after the other as if each had an
// entry of its own: the i-th (from 0) of an entry at index has position
// floor + index + i, its grant that token, and after the entry the floor grows
// by the batch's length less one, so the next entry's positions follow on.
// Every grant's token thus stays distinct and larger than every earlier one.
func (t *Table) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		return nil
	}
	if len(l.Data) > 0 && (l.Data[0] == EncodingVersion || l.Data[0] == TxnVersion) {
		c, err := Decode(l.Data)
		if err != nil {
			panic(fmt.Sprintf("fsm: undecodable entry at index %d: %v", l.Index, err))
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.apply(l.Index, &c)
	}
	cmds, err := DecodeEntry(l.Data)
	if err != nil {
		panic(fmt.Sprintf("fsm: undecodable entry at index %d: %v", l.Index, err))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.applyBatch(l.Index, cmds)
}

func (t *Table) applyBatch(index uint64, cmds []Command) []*Result {
	t.advance(index)
	out := make([]*Result, len(cmds))
	for i := range cmds {
		pos := t.floor + index + uint64(i)
		out[i] = t.applyAt(pos, &cmds[i])
		t.forget(pos)
		t.floor, t.extra = t.floor+t.extra, 0
		if out[i].Code == Unreadable {
			// What follows a raise to a level this build cannot read may
			// be written at that level: the node stops here (applyFormat).
			return out[:i+1]
		}
	}
	if len(cmds) > 1 {
		t.floor += uint64(len(cmds) - 1)
	}
	return out
}

// advance records index as applied; entries come in log order.
func (t *Table) advance(index uint64) {
	if index <= t.lastIndex {
		panic(fmt.Sprintf("fsm: entry index %d not after last applied %d", index, t.lastIndex))
	}
	t.lastIndex = index
}

func (t *Table) apply(index uint64, c *Command) *Result {
	t.advance(index)
	pos := t.floor + index
	r := t.applyAt(pos, c)
	t.forget(pos)
	t.floor, t.extra = t.floor+t.extra, 0
	return r
}

// applyAt applies c at position pos. The caller then forgets what release
// memory has outlived pos (once per command, a transaction counting as one).
func (t *Table) applyAt(pos uint64, c *Command) *Result {
	r := &Result{}
	t.applyInto(r, pos, c)
	return r
}

// subResults makes n zero results for the commands of a transaction, in
// one allocation for the usual one command.
func subResults(n int) []*Result {
	if n == 1 {
		one := &struct {
			r   Result
			ptr [1]*Result
		}{}
		one.ptr[0] = &one.r
		return one.ptr[:]
	}
	subs := make([]Result, n)
	ptrs := make([]*Result, n)
	for i := range subs {
		ptrs[i] = &subs[i]
	}
	return ptrs
}

// applyInto is applyAt writing into r, a zero Result: it dispatches c to
// the method of its op. A key's command (every op but a member, cluster ID,
// transaction or session command) goes through applyKey, which does what
// every key's command shares before and after its op's own method.
func (t *Table) applyInto(r *Result, pos uint64, c *Command) {
	r.Position, r.Cmd = pos, c
	switch {
	case c.Op == OpClusterID:
		t.applyClusterID(r, c)
	case c.Op == OpFormat:
		t.applyFormat(r, c)
	case c.Op == OpMember:
		t.applyMember(r, c)
	case c.Op == OpTxn:
		t.applyTxn(r, pos, c)
	case c.Op.IsSession():
		t.applySession(r, pos, c)
	default:
		t.applyKey(r, pos, c)
	}
}

// applyClusterID names the cluster if it has no name yet.
func (t *Table) applyClusterID(r *Result, c *Command) {
	if t.clusterID != "" {
		r.Code = Stale
		return
	}
	t.clusterID = c.Key
	r.Code = Recorded
}

// applyMember records or forgets a member's client address.
func (t *Table) applyMember(r *Result, c *Command) {
	if c.Owner == "" {
		delete(t.members, c.Key)
	} else {
		t.members[c.Key] = c.Owner
	}
	r.Code = Recorded
}

// applyTxn applies a transaction's commands, all at pos, if every guard and
// scan still holds, and nothing otherwise.
func (t *Table) applyTxn(r *Result, pos uint64, c *Command) {
	for _, g := range c.Txn.Guards {
		if t.guard(g.Key) != g {
			r.Code = Conflict
			return
		}
	}
	for _, sc := range c.Txn.Scans {
		if t.scan(sc.Pattern) != sc {
			r.Code = Conflict
			return
		}
	}
	r.Code = Applied
	r.Sub = subResults(len(c.Txn.Cmds))
	for i := range c.Txn.Cmds {
		t.applyInto(r.Sub[i], pos, &c.Txn.Cmds[i])
	}
}

// applyKey applies a command on one key: a shared key's (or a shared
// acquire) in applyShared; any other first ends the lease the leader saw
// run out (an acquire's or extend's Lease), runs its op's method, hands
// the key to the command's waiter, and sets the result's lease.
func (t *Table) applyKey(r *Result, pos uint64, c *Command) {
	cur := t.locks[c.Key]
	if c.Mode != ModeNone || cur != nil && cur.Kind == KindShared && c.Op != OpPut {
		t.applyShared(r, pos, c, cur)
		return
	}
	// An acquire or extend may first end a lease that the leader saw run out.
	if c.Lease != nil && (c.Op == OpAcquire || c.Op == OpExtend) && cur != nil && cur.Ref() == *c.Lease {
		r.Freed = t.free(c.Key, cur)
		cur = nil
	}
	switch c.Op {
	case OpAcquire:
		t.applyAcquire(r, pos, c, cur)
	case OpExtend:
		t.applyExtend(r, pos, c, cur)
	case OpProclaim:
		t.applyProclaim(r, pos, c, cur)
	case OpRelease:
		t.applyRelease(r, pos, c, cur)
	case OpExpire:
		t.applyExpire(r, c, cur)
	case OpPut:
		t.applyPut(r, pos, c, cur)
	case OpRevoke:
		t.applyRevoke(r, c, cur)
	case OpGrant:
		// Nothing of its own: its waiter's hand-off below is all it does.
	}
	if c.Waiter != nil {
		r.Waiter = t.handOff(c.Key, c.Waiter, pos)
	}
	if c.Op == OpGrant {
		r.Code = grantCode(r.Waiter)
	}
	t.setResultLease(r, c)
}

// applyAcquire grants a free key, or renews the holder's lease.
func (t *Table) applyAcquire(r *Result, pos uint64, c *Command, cur *Lease) {
	switch {
	case c.Session != 0 && t.sessions[c.Session] == nil:
		r.Code = NoSession
	case cur == nil && !c.Redis && t.refuses(c.Key, c.Owner):
		r.Code = Refused
	case cur == nil:
		t.grant(c.Key, Waiter{Owner: c.Owner, TTL: c.TTL, Session: c.Session, Value: c.Data}, pos)
		r.Code = Granted
	case cur.holds(c.Owner, c.Session) && !c.Redis:
		// The holder's acquire renews its lease and returns the same
		// grant; under a session, where the lock lives as long as the
		// session, it changes nothing.
		if c.Session == 0 {
			cur.TTL, cur.Version, cur.Mod, cur.Deadline = c.TTL, pos, pos, 0
		}
		r.Code = Renewed
	default:
		r.Code = Held
	}
}

// applyExtend renews the holder's lease.
func (t *Table) applyExtend(r *Result, pos uint64, c *Command, cur *Lease) {
	if cur != nil && cur.holds(c.Owner, 0) {
		cur.TTL, cur.Version, cur.Mod, cur.Deadline = c.TTL, pos, pos, 0
		r.Code = Extended
	} else {
		r.Code = NotHolder
	}
}

// applyProclaim sets the value of a lock held under a session.
func (t *Table) applyProclaim(r *Result, pos uint64, c *Command, cur *Lease) {
	if cur != nil && cur.holds(c.Owner, c.Session) {
		cur.Data, cur.Mod = c.Data, pos
		r.Code = Proclaimed
	} else {
		r.Code = NotHolder
	}
}

// applyRelease frees the holder's lock and, unless under Redis semantics,
// remembers the release. With GiveUp a release by an owner that holds
// nothing on the key is remembered too, at pos (keeping the token of the
// owner's remembered release, if any; else 0): it answers as it would
// without GiveUp.
func (t *Table) applyRelease(r *Result, pos uint64, c *Command, cur *Lease) {
	switch {
	case cur != nil && cur.holds(c.Owner, c.Session):
		r.Freed = t.release(c.Key, cur)
		if !c.Redis {
			t.remember(c.Key, cur.Owner, cur.Token, pos)
		}
		r.Code = Released
	case c.GiveUp && (cur == nil || cur.Owner != c.Owner):
		token := t.releasedToken(c.Key, c.Owner)
		t.remember(c.Key, c.Owner, token, pos)
		r.Code = NotHolder
		if token != 0 {
			r.Code = AlreadyReleased
		}
	case !c.Redis && t.remembered(c.Key, c.Owner):
		r.Code = AlreadyReleased
	default:
		r.Code = NotHolder
	}
}

// applyExpire frees the key if its lease is still the one the leader timed.
func (t *Table) applyExpire(r *Result, c *Command, cur *Lease) {
	if cur != nil && cur.Ref() == *c.Lease {
		r.Freed = t.free(c.Key, cur)
		r.Code = Expired
	} else {
		r.Code = Stale
	}
}

// applyRevoke frees the key administratively, or only the grant it names.
func (t *Table) applyRevoke(r *Result, c *Command, cur *Lease) {
	if cur != nil && (c.Owner == "" || cur.Owner == c.Owner) &&
		(c.Lease == nil || c.Lease.Token == 0 || c.Lease.Token == cur.Token) {
		// A revoke that names the lock's session is the leader's own, on
		// the holder's behalf (a grant no caller received): the lock
		// was never the holder's to lose, so it is not counted as taken.
		r.Freed = t.drop(c.Key, cur, c.Session == 0 || c.Session != cur.Session)
		r.Code = Revoked
	} else {
		r.Code = Stale
	}
}

// grantCode is an OpGrant's code: its waiter's outcome.
func grantCode(w WaiterOutcome) Code {
	switch w {
	case WaiterGranted:
		return Granted
	case WaiterRefused:
		return Refused
	case WaiterNoSession:
		return NoSession
	}
	return Held
}

// setResultLease sets r's Lease to c's key's after c (without a shared
// key's holders), and, if c's waiter was granted a shared key, r's Holder to
// its holder.
func (t *Table) setResultLease(r *Result, c *Command) {
	if l := t.locks[c.Key]; l != nil {
		r.Lease = *l
		if l.Shared != nil {
			r.Lease.Shared = nil
			if r.Waiter == WaiterGranted {
				r.Holder = l.Shared.byOwner(c.Waiter.Owner, c.Waiter.Session)
			}
		}
	}
	if r.Holder != nil {
		// A copy: the table's own changes under its lock, and the result
		// is read outside it.
		hc := *r.Holder
		r.Holder = &hc
	}
}

// holds reports whether owner, under session (zero: none), holds the lock
// l: a string whose holder is that pair.
func (l *Lease) holds(owner string, session uint64) bool {
	return l.Owner == owner && l.Session == session && l.Kind == KindString
}

// handOff grants key, if it is free, to waiter w at pos, unless w's release
// of the key is remembered or w's session is not open.
func (t *Table) handOff(key string, w *Waiter, pos uint64) WaiterOutcome {
	if w.Mode != ModeNone {
		return t.handOffShared(key, w, pos)
	}
	switch {
	case t.locks[key] != nil:
		return WaiterNone
	case t.refuses(key, w.Owner):
		return WaiterRefused
	case w.Session != 0 && t.sessions[w.Session] == nil:
		return WaiterNoSession
	}
	t.grant(key, *w, pos)
	return WaiterGranted
}

// applyPut stores c's value under its key. A string gets a new token when it is
// created or its value changes, a hash when it is created; other kinds have
// none. Unless c keeps the TTL, the lease restarts (a new version); with
// KeepTTL a key keeps its TTL, its version and its node-local deadline,
// except that a new token starts a new version (the deadline is still kept).
func (t *Table) applyPut(r *Result, pos uint64, c *Command, cur *Lease) {
	if cur != nil && cur.Session != 0 {
		// A write over a lock held under a session ends that grant: the
		// key leaves the session, and the value is a new key.
		r.Freed = t.free(c.Key, cur)
		cur = nil
	}
	l := &Lease{Owner: c.Owner, Kind: c.Kind, Data: c.Data, Mod: pos, TTL: c.TTL, Version: pos}
	if cur != nil && cur.Kind == c.Kind {
		l.Token = cur.Token
		if c.Kind == KindString && cur.Owner != c.Owner {
			l.Token = t.newToken(pos)
		}
		if c.KeepTTL {
			l.TTL, l.Deadline = cur.TTL, cur.Deadline
			if l.Token == cur.Token {
				l.Version = cur.Version
			}
		}
	} else {
		if cur != nil {
			if c.KeepTTL {
				l.TTL, l.Deadline = cur.TTL, cur.Deadline
			}
			r.Freed = t.free(c.Key, cur)
		} else if c.KeepTTL {
			l.TTL = 0
		}
		if c.Kind.HasToken() {
			l.Token = t.newToken(pos)
		}
		r.Created = true
	}
	t.locks[c.Key] = l
	r.Code = Written
}
