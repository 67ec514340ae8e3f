package fsm

import "slices"

// Shared is the state of a shared key (KindShared): a read-write lock, whose
// holders are any number of readers or one writer, or a semaphore of Permits
// permits, whose holders each hold one slot 0..Permits-1.
//
// Each holder is a grant of its own: its own owner, token, TTL or session,
// renewed, released and expired on its own. Every grant takes the position
// of the command that makes it as its token, as a plain lock's grant does,
// so a writer's token is larger than every earlier grant's on the key,
// readers' included, and each slot's tokens increase. The key leaves the
// table with its last holder; the kind of lock it was goes with it.
type Shared struct {
	// Permits is a semaphore's number of permits; zero for a read-write
	// lock.
	Permits uint64
	// Holders are in the order granted: increasing tokens.
	Holders []*Holder
}

// Holder is one grant of a shared key. Its Lease has the grant's Owner,
// Token, TTL, Version, Mod, Session, Data (its value under a session) and
// node-local Deadline; Kind is KindShared and Shared nil.
type Holder struct {
	Lease
	Mode Mode   // ModeRead, ModeWrite or ModePermit
	Slot uint64 // a permit's slot
}

// copy returns l with its own copy of a shared key's holders, so that a
// reader outside the table's lock never shares them with Apply.
func (l *Lease) copy() Lease {
	c := *l
	if l.Shared != nil {
		sh := &Shared{Permits: l.Shared.Permits, Holders: make([]*Holder, len(l.Shared.Holders))}
		for i, h := range l.Shared.Holders {
			hc := *h
			sh.Holders[i] = &hc
		}
		c.Shared = sh
	}
	return c
}

// byRef returns the holder ref names, or nil.
func (sh *Shared) byRef(ref LeaseRef) *Holder {
	for _, h := range sh.Holders {
		if h.Ref() == ref {
			return h
		}
	}
	return nil
}

// byOwner returns the holder that owner holds under session, or nil.
func (sh *Shared) byOwner(owner string, session uint64) *Holder {
	for _, h := range sh.Holders {
		if h.Owner == owner && h.Session == session {
			return h
		}
	}
	return nil
}

// fits reports whether a new holder of mode m could join the holders now.
func (sh *Shared) fits(m Mode) bool {
	switch m {
	case ModeRead:
		return !slices.ContainsFunc(sh.Holders, func(h *Holder) bool { return h.Mode == ModeWrite })
	case ModePermit:
		return uint64(len(sh.Holders)) < sh.Permits
	}
	return len(sh.Holders) == 0 // a writer
}

// kindOf reports whether a shared key sh takes a grant of mode m with
// permits: a reader or writer of a read-write lock, a permit of a semaphore
// with the same number of permits.
func (sh *Shared) kindOf(m Mode, permits uint64) bool {
	if m == ModePermit {
		return sh.Permits == permits
	}
	return sh.Permits == 0 && (m == ModeRead || m == ModeWrite)
}

// freeSlot returns the lowest slot no holder has.
func (sh *Shared) freeSlot() uint64 {
	for s := uint64(0); ; s++ {
		if !slices.ContainsFunc(sh.Holders, func(h *Holder) bool { return h.Slot == s }) {
			return s
		}
	}
}

// Admits reports whether the held key l would take waiter w now: a shared
// key of w's kind whose holders let w join (and w not among them). A plain
// lock or value takes no waiter while held.
func (l *Lease) Admits(w Waiter) bool {
	return w.Mode != ModeNone && l.Kind == KindShared && l.Shared.kindOf(w.Mode, w.Permits) &&
		l.Shared.byOwner(w.Owner, w.Session) == nil && l.Shared.fits(w.Mode)
}

// Holder returns owner's holder of the shared key l under session, or nil.
func (l *Lease) Holder(owner string, session uint64) *Holder {
	if l.Shared == nil {
		return nil
	}
	return l.Shared.byOwner(owner, session)
}

// applyShared applies a command to a shared key, or a shared acquire to
// any key. A mode on a key of another kind, or a semaphore's acquire with
// another number of permits, is Mismatch and changes nothing.
func (t *Table) applyShared(r *Result, pos uint64, c *Command, cur *Lease) {
	key := c.Key
	switch c.Op {
	case OpAcquire:
		if cur != nil && c.Lease != nil && cur.Kind == KindShared {
			// A holder that ran out on the leader ends in the same entry.
			if h := cur.Shared.byRef(*c.Lease); h != nil {
				r.Freed = t.freeHolder(key, cur, h, true)
			}
		}
		switch {
		case c.Session != 0 && t.sessions[c.Session] == nil:
			r.Code = NoSession
		case c.Mode == ModeNone:
			r.Code = Held // a plain acquire of a shared key
		default:
			r.Code, r.Holder = t.admit(key, Waiter{Owner: c.Owner, TTL: c.TTL, Session: c.Session, Value: c.Data, Mode: c.Mode, Permits: c.Permits}, pos)
		}
	case OpExtend:
		if c.Lease != nil {
			// The holder ran out on the leader: it ends, not renews.
			if h := cur.Shared.byRef(*c.Lease); h != nil {
				r.Freed = t.freeHolder(key, cur, h, true)
			}
		}
		if h := cur.Holder(c.Owner, 0); h != nil && t.locks[key] != nil {
			h.TTL, h.Version, h.Mod, h.Deadline = c.TTL, pos, pos, 0
			cur.Mod = pos
			r.Code, r.Holder = Extended, h
		} else {
			r.Code = NotHolder
		}
	case OpRelease:
		// A shared holder's release is not remembered.
		if h := cur.Shared.byOwner(c.Owner, c.Session); h != nil && !c.Redis {
			r.Freed = t.freeHolder(key, cur, h, false)
			r.Code, r.Holder = Released, h
		} else {
			r.Code = NotHolder
		}
	case OpExpire:
		if h := cur.Shared.byRef(*c.Lease); h != nil {
			r.Freed = t.freeHolder(key, cur, h, true)
			r.Code, r.Holder = Expired, h
		} else {
			r.Code = Stale
		}
	case OpRevoke:
		r.Code = Stale
		if c.Owner == "" && (c.Lease == nil || c.Lease.Token == 0) {
			r.Freed = t.free(key, cur)
			r.Code = Revoked
			break
		}
		for _, h := range cur.Shared.Holders {
			if (c.Owner == "" || h.Owner == c.Owner) && (c.Lease == nil || c.Lease.Token == 0 || c.Lease.Token == h.Token) {
				// As for a plain lock: a revoke naming the holder's
				// session is the leader's own, not a taking.
				r.Freed = t.freeHolder(key, cur, h, c.Session == 0 || c.Session != h.Session)
				r.Code, r.Holder = Revoked, h
				break
			}
		}
	case OpGrant:
	default: // OpProclaim: a shared key's holders have no value to set
		r.Code = NotHolder
	}
	// An acquire that granted took the entry's position as its token: its
	// waiter waits for a later entry, so that every grant has a token of
	// its own.
	if c.Waiter != nil && !(c.Op == OpAcquire && r.Code == Granted) {
		r.Waiter = t.handOff(key, c.Waiter, pos)
	}
	if c.Op == OpGrant {
		switch r.Waiter {
		case WaiterGranted:
			r.Code = Granted
		case WaiterNoSession:
			r.Code = NoSession
		default:
			r.Code = Held
		}
	}
	t.setResultLease(r, c)
}

// admit grants key to w, a shared acquire, at pos if it fits: a new
// shared key if key is free, a new holder if the holders let it join, or,
// for a holder's own acquire, a renewal (a writer's read acquire downgrades
// it to a reader, keeping its token; a reader's write acquire changes
// nothing: an upgrade could deadlock, so it is refused). It returns the
// outcome and the holder granted or renewed.
func (t *Table) admit(key string, w Waiter, pos uint64) (Code, *Holder) {
	cur := t.locks[key]
	if cur == nil {
		l := &Lease{Kind: KindShared, Mod: pos, Shared: &Shared{}}
		if w.Mode == ModePermit {
			l.Shared.Permits = w.Permits
		}
		t.locks[key] = l
		return Granted, t.addHolder(key, l, w, pos)
	}
	if cur.Kind != KindShared || !cur.Shared.kindOf(w.Mode, w.Permits) {
		return Mismatch, nil
	}
	sh := cur.Shared
	if h := sh.byOwner(w.Owner, w.Session); h != nil {
		if h.Mode == ModeRead && w.Mode == ModeWrite {
			return Held, nil
		}
		if h.Mode == ModeWrite && w.Mode == ModeRead {
			h.Mode = ModeRead
		}
		if w.Session == 0 {
			h.TTL, h.Version, h.Deadline = w.TTL, pos, 0
		}
		h.Mod, cur.Mod = pos, pos
		return Renewed, h
	}
	if !sh.fits(w.Mode) {
		return Held, nil
	}
	return Granted, t.addHolder(key, cur, w, pos)
}

// addHolder adds w as a holder of the shared key l at pos, with a new
// token; a permit takes the lowest free slot.
func (t *Table) addHolder(key string, l *Lease, w Waiter, pos uint64) *Holder {
	h := &Holder{Mode: w.Mode}
	h.Lease = Lease{Kind: KindShared, Owner: w.Owner, Token: t.newToken(pos), TTL: w.TTL, Version: pos, Mod: pos, Session: w.Session, Data: w.Value}
	if w.Mode == ModePermit {
		h.Slot = l.Shared.freeSlot()
	}
	l.Shared.Holders = append(l.Shared.Holders, h)
	l.Token, l.Mod = h.Token, pos
	if w.Session != 0 {
		t.sessions[w.Session].keys[key] = struct{}{}
	}
	return h
}

// handOffShared grants key to the shared waiter w at pos if it fits (the
// key is free, or the holders let it join), unless w's session is not
// open.
func (t *Table) handOffShared(key string, w *Waiter, pos uint64) WaiterOutcome {
	cur := t.locks[key]
	switch {
	case cur != nil && !cur.Admits(*w):
		return WaiterNone
	case w.Session != 0 && t.sessions[w.Session] == nil:
		return WaiterNoSession
	}
	t.admit(key, *w, pos)
	return WaiterGranted
}

// freeHolder removes h from the shared key l, and l from the table with its
// last holder; taken counts it as taken from its session. It returns h's
// lease.
func (t *Table) freeHolder(key string, l *Lease, h *Holder, taken bool) *Lease {
	sh := l.Shared
	sh.Holders = slices.DeleteFunc(sh.Holders, func(x *Holder) bool { return x == h })
	t.leaveSession(key, l, h, taken)
	if len(sh.Holders) == 0 {
		delete(t.locks, key)
	}
	return &h.Lease
}

// leaveSession takes h, a holder of the shared key l that is leaving it,
// out of its session, counting it as taken if taken is set; the key stays
// in the session while another of its holders is under it.
func (t *Table) leaveSession(key string, l *Lease, h *Holder, taken bool) {
	s := t.sessions[h.Session]
	if h.Session == 0 || s == nil {
		return
	}
	if taken {
		s.Taken++
	}
	if !slices.ContainsFunc(l.Shared.Holders, func(x *Holder) bool { return x != h && x.Session == h.Session }) {
		delete(s.keys, key)
	}
}
