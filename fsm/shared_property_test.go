package fsm

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The property tests of shared keys: random sequences of readers, writers,
// permits, plain acquires and multi-key transactions over a few keys and
// owners, with extends, releases, expiries, revokes, hand-offs to waiters of
// every mode, sessions and their ends, puts, and snapshots restored into
// fresh tables, checked after every entry.

var (
	sharedKeys   = []string{"a", "b", "c"}
	sharedOwners = []string{"o1", "o2", "o3", "o4"}
)

// sharedGen makes commands from the table's current state, as a leader
// would, so that extends, releases, expiries and revokes often name real
// holders (and sometimes ones that do not exist).
type sharedGen struct {
	rng      *rand.Rand
	sessions []uint64 // every session opened so far, open or not
	// acquireWaiters lets a shared acquire carry a waiter (see
	// TestSharedAcquireWithWaiterGivesOneToken).
	acquireWaiters bool
}

// holderOf is a holder of key, or a plain key's lease as a holder of mode
// ModeNone.
func holdersOf(t *Table, key string) []Holder {
	l := t.locks[key]
	switch {
	case l == nil:
		return nil
	case l.Kind == KindShared:
		hs := make([]Holder, len(l.Shared.Holders))
		for i, h := range l.Shared.Holders {
			hs[i] = *h
		}
		return hs
	}
	return []Holder{{Lease: *l}}
}

func (g *sharedGen) pick(s []string) string { return s[g.rng.Intn(len(s))] }

// session returns an open session mostly, else one that ended or never was.
func (g *sharedGen) session(t *Table) uint64 {
	var open []uint64
	for _, id := range g.sessions {
		if t.sessions[id] != nil {
			open = append(open, id)
		}
	}
	switch {
	case len(open) > 0 && g.rng.Intn(6) != 0:
		return open[g.rng.Intn(len(open))]
	case len(g.sessions) > 0 && g.rng.Intn(2) == 0:
		return g.sessions[g.rng.Intn(len(g.sessions))]
	}
	return uint64(g.rng.Intn(int(t.floor+t.lastIndex)+2) + 1)
}

// holder returns a random holder of key (ok false if it has none).
func (g *sharedGen) holder(t *Table, key string) (Holder, bool) {
	hs := holdersOf(t, key)
	if len(hs) == 0 {
		return Holder{}, false
	}
	return hs[g.rng.Intn(len(hs))], true
}

// permits returns the semaphore's number of permits mostly, else 2 or 3.
func (g *sharedGen) permits(t *Table, key string) uint64 {
	if l := t.locks[key]; l != nil && l.Kind == KindShared && l.Shared.Permits != 0 && g.rng.Intn(6) != 0 {
		return l.Shared.Permits
	}
	return uint64(2 + g.rng.Intn(2))
}

func (g *sharedGen) mode() Mode { return Mode(g.rng.Intn(4)) }

// waiter returns a waiter for key of a random mode, with a TTL or under a
// session.
func (g *sharedGen) waiter(t *Table, key string) Waiter {
	w := Waiter{Owner: g.pick(sharedOwners), TTL: 1000, Mode: g.mode()}
	if w.Mode == ModePermit {
		w.Permits = g.permits(t, key)
	}
	if g.rng.Intn(3) == 0 {
		w.TTL, w.Session = 0, g.session(t)
		if g.rng.Intn(2) == 0 {
			w.Value = "wv"
		}
	}
	return w
}

func (g *sharedGen) maybeWaiter(t *Table, key string) *Waiter {
	if g.rng.Intn(3) != 0 {
		return nil
	}
	w := g.waiter(t, key)
	return &w
}

// ref returns the lease ref of a holder of key, or a bogus one.
func (g *sharedGen) ref(t *Table, key string) *LeaseRef {
	if h, ok := g.holder(t, key); ok && g.rng.Intn(4) != 0 {
		r := h.Ref()
		return &r
	}
	pos := int(t.floor+t.lastIndex) + 1
	return &LeaseRef{Token: uint64(g.rng.Intn(pos)), Version: uint64(g.rng.Intn(pos))}
}

// owner returns the owner (and session) of a holder of key mostly, else a
// random owner without a session.
func (g *sharedGen) owner(t *Table, key string) (string, uint64) {
	if h, ok := g.holder(t, key); ok && h.Owner != "" && g.rng.Intn(3) != 0 {
		return h.Owner, h.Session
	}
	return g.pick(sharedOwners), 0
}

func (g *sharedGen) next(t *Table) Command {
	rng := g.rng
	key := g.pick(sharedKeys)
	ttl := uint64(rng.Intn(5000) + 100)
	switch n := rng.Intn(100); {
	case n < 24: // a shared acquire
		c := Command{Op: OpAcquire, Key: key, Owner: g.pick(sharedOwners), TTL: ttl, Mode: ModeRead + Mode(rng.Intn(3))}
		var session uint64
		if rng.Intn(3) == 0 {
			c.Owner, session = g.owner(t, key) // a renewal, a downgrade or an upgrade
		}
		if c.Mode == ModePermit {
			c.Permits = g.permits(t, key)
		}
		if session != 0 || rng.Intn(4) == 0 {
			if session == 0 || rng.Intn(5) == 0 {
				session = g.session(t)
			}
			c.TTL, c.Session = 0, session
			if rng.Intn(3) == 0 {
				c.Data = "v" + c.Owner
			}
		}
		if rng.Intn(8) == 0 {
			c.Lease = g.ref(t, key) // a holder that ran out on the leader
		}
		if g.acquireWaiters {
			c.Waiter = g.maybeWaiter(t, key)
		}
		return c
	case n < 32: // a plain acquire
		c := Command{Op: OpAcquire, Key: key, Owner: g.pick(sharedOwners), TTL: ttl}
		switch rng.Intn(4) {
		case 0:
			c.TTL, c.Session = 0, g.session(t)
		case 1:
			c.Redis = true
		}
		return c
	case n < 38:
		c := Command{Op: OpExtend, Key: key, TTL: ttl}
		c.Owner, _ = g.owner(t, key)
		if rng.Intn(5) == 0 {
			c.Lease = g.ref(t, key)
		}
		c.Waiter = g.maybeWaiter(t, key)
		return c
	case n < 46:
		c := Command{Op: OpRelease, Key: key}
		c.Owner, c.Session = g.owner(t, key)
		switch rng.Intn(6) {
		case 0:
			c.Session = g.session(t)
		case 1:
			c.Session, c.Redis = 0, true
		}
		c.Waiter = g.maybeWaiter(t, key)
		return c
	case n < 52:
		return Command{Op: OpExpire, Key: key, Lease: g.ref(t, key), Waiter: g.maybeWaiter(t, key)}
	case n < 57:
		c := Command{Op: OpRevoke, Key: key, Waiter: g.maybeWaiter(t, key)}
		h, ok := g.holder(t, key)
		switch rng.Intn(4) {
		case 1: // by owner
			c.Owner = g.pick(sharedOwners)
			if ok && h.Owner != "" && rng.Intn(2) == 0 {
				c.Owner = h.Owner
			}
		case 2: // one grant, by owner and token
			c.Owner, c.Lease = g.pick(sharedOwners), g.ref(t, key)
			if ok && rng.Intn(3) != 0 {
				c.Owner, c.Lease = h.Owner, &LeaseRef{Token: h.Token}
			}
		case 3: // the leader's revoke of a grant no caller received
			if ok {
				c.Owner, c.Lease, c.Session = h.Owner, &LeaseRef{Token: h.Token}, h.Session
			}
		}
		return c
	case n < 63:
		w := g.waiter(t, key)
		return Command{Op: OpGrant, Key: key, Waiter: &w}
	case n < 67:
		// At least 128 ms: a shorter TTL's one-byte varint makes an entry
		// a batch refuses (TestBatchOfShortCommands).
		return Command{Op: OpSessionOpen, TTL: ttl + 1000}
	case n < 69:
		return Command{Op: OpSessionRenew, Session: g.session(t)}
	case n < 77:
		ops := []Op{OpSessionClose, OpSessionExpire, OpSessionRevoke}
		c := Command{Op: ops[rng.Intn(len(ops))], Session: g.session(t)}
		if c.Op == OpSessionExpire {
			v := uint64(rng.Intn(int(t.floor+t.lastIndex) + 1))
			if s := t.sessions[c.Session]; s != nil && rng.Intn(4) != 0 {
				v = s.Version
			}
			c.Lease = &LeaseRef{Version: v}
		}
		for _, k := range sharedKeys {
			if rng.Intn(2) == 0 {
				c.Waiters = append(c.Waiters, KeyWaiter{Key: k, Waiter: g.waiter(t, k)})
			}
		}
		return c
	case n < 82: // a Redis write over whatever the key holds
		c := Command{Op: OpPut, Key: key, Owner: g.pick(sharedOwners)}
		if rng.Intn(3) == 0 {
			c.Owner, c.Kind, c.Data = "", KindList, "l"
		}
		if rng.Intn(3) == 0 {
			c.KeepTTL = true
		} else if rng.Intn(2) == 0 {
			c.TTL = ttl
		}
		return c
	case n < 96: // several keys at once: plain acquires sharing one token
		var keys []string
		free := rng.Intn(2) == 0 // only keys free now: the usual case
		for _, k := range sharedKeys {
			if rng.Intn(2) == 0 && (!free || t.locks[k] == nil) {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			keys = []string{key}
		}
		txn := &Txn{}
		owner := g.pick(sharedOwners)
		for _, k := range keys {
			gd := t.guard(k)
			gd.Mod = 0 // the leader saw it free
			if rng.Intn(8) == 0 {
				gd.Mem = uint64(rng.Intn(int(t.floor+t.lastIndex) + 1))
			}
			txn.Guards = append(txn.Guards, gd)
			txn.Cmds = append(txn.Cmds, Command{Op: OpAcquire, Key: k, Owner: owner, TTL: ttl})
		}
		return Command{Op: OpTxn, Txn: txn}
	default:
		c := Command{Op: OpProclaim, Key: key, Data: "p"}
		c.Owner, c.Session = g.owner(t, key)
		if c.Session == 0 {
			c.Session = g.session(t)
		}
		return c
	}
}

// flatten returns the results of an entry's commands and, for a
// transaction or a session's end, of its parts.
func flatten(rs []*Result) []*Result {
	var out []*Result
	for _, r := range rs {
		out = append(out, r)
		out = append(out, r.Sub...)
	}
	return out
}

// sharedChecker follows one table through a run and checks every entry.
type sharedChecker struct {
	t    testing.TB
	tb   *Table
	what string // seed and step, for messages
	// lastGrant is the largest token granted on each key so far; slot the
	// largest granted on each semaphore slot; maxToken the largest
	// anywhere.
	lastGrant map[string]uint64
	slot      map[string]map[uint64]uint64
	maxToken  uint64
	prev      map[string][]Holder
	batched   bool // entries of several commands
}

func newSharedChecker(t testing.TB, tb *Table) *sharedChecker {
	c := &sharedChecker{t: t, tb: tb, lastGrant: map[string]uint64{}, slot: map[string]map[uint64]uint64{}, prev: map[string][]Holder{}}
	c.maxToken = tb.maxToken
	for _, k := range sharedKeys {
		c.prev[k] = holdersOf(tb, k)
		for _, h := range c.prev[k] {
			c.lastGrant[k] = max(c.lastGrant[k], h.Token)
		}
	}
	return c
}

func (c *sharedChecker) fail(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("%s: %s", c.what, fmt.Sprintf(format, args...))
}

// structure checks the table as it is: a writer alone, at most Permits
// permits in distinct slots below it, holders in increasing token order,
// no shared key without holders, and sessions that list exactly the keys
// they hold.
func (c *sharedChecker) structure() {
	c.t.Helper()
	tb := c.tb
	for k, l := range tb.locks {
		if l.Kind != KindShared {
			if l.Shared != nil {
				c.fail("%q of kind %d has holders", k, l.Kind)
			}
			if l.Session != 0 {
				if s := tb.sessions[l.Session]; s == nil {
					c.fail("%q held under session %d, which is not open", k, l.Session)
				} else if _, ok := s.keys[k]; !ok {
					c.fail("%q held under session %d, which does not list it", k, l.Session)
				}
			}
			continue
		}
		sh := l.Shared
		if len(sh.Holders) == 0 {
			c.fail("shared key %q has no holders", k)
		}
		slots := map[uint64]bool{}
		var last uint64
		for _, h := range sh.Holders {
			switch {
			case sh.Permits == 0 && h.Mode == ModeWrite && len(sh.Holders) > 1:
				c.fail("%q: a writer with another holder: %s", k, describe(sh))
			case sh.Permits == 0 && h.Mode != ModeRead && h.Mode != ModeWrite:
				c.fail("%q: a %s on a read-write lock", k, h.Mode)
			case sh.Permits != 0 && h.Mode != ModePermit:
				c.fail("%q: a %s on a semaphore", k, h.Mode)
			case sh.Permits != 0 && (h.Slot >= sh.Permits || slots[h.Slot]):
				c.fail("%q: slot %d taken twice or beyond %d permits: %s", k, h.Slot, sh.Permits, describe(sh))
			case h.Token <= last:
				c.fail("%q: holders not in increasing token order: %s", k, describe(sh))
			case (h.Session == 0) == (h.TTL == 0):
				c.fail("%q: holder %s with TTL %d under session %d", k, h.Owner, h.TTL, h.Session)
			}
			slots[h.Slot], last = true, h.Token
			if h.Session != 0 {
				if s := tb.sessions[h.Session]; s == nil {
					c.fail("%q: %s holds under session %d, which is not open", k, h.Owner, h.Session)
				} else if _, ok := s.keys[k]; !ok {
					c.fail("%q: %s holds under session %d, which does not list it", k, h.Owner, h.Session)
				}
			}
		}
		if sh.Permits != 0 && uint64(len(sh.Holders)) > sh.Permits {
			c.fail("%q: %d holders of %d permits", k, len(sh.Holders), sh.Permits)
		}
	}
	for id, s := range tb.sessions {
		for k := range s.keys {
			if !slices.ContainsFunc(holdersOf(tb, k), func(h Holder) bool { return h.Session == id }) {
				c.fail("session %d lists %q, where it holds nothing: %+v", id, k, tb.locks[k])
			}
		}
	}
}

func describe(sh *Shared) string {
	s := fmt.Sprintf("permits %d:", sh.Permits)
	for _, h := range sh.Holders {
		s += fmt.Sprintf(" %s/%d/%s/slot%d/s%d", h.Owner, h.Token, h.Mode, h.Slot, h.Session)
	}
	return s
}

// entry checks what an entry, whose results are rs, changed: holders come
// and go only on the keys its commands name; a new holder's token is its
// grant's position, larger than every earlier grant's (on its key, on its
// slot, anywhere); a holder that stays keeps its token, owner, session and
// slot, and changes mode only in a downgrade; a renewal keeps the token.
func (c *sharedChecker) entry(rs []*Result) {
	c.t.Helper()
	c.structure()
	positions := map[string][]uint64{}
	for _, r := range rs {
		switch {
		case r.Cmd.Op == OpTxn || r.Cmd.Op.IsSession():
			for _, s := range r.Sub {
				positions[s.Cmd.Key] = append(positions[s.Cmd.Key], s.Position)
			}
		case r.Cmd.Op != OpMember:
			positions[r.Cmd.Key] = append(positions[r.Cmd.Key], r.Position)
		}
	}
	all := flatten(rs)
	newMax := c.maxToken
	prev, next := c.prev, map[string][]Holder{}
	for _, k := range sharedKeys {
		before, after := prev[k], holdersOf(c.tb, k)
		byToken := map[uint64]Holder{}
		for _, h := range before {
			byToken[h.Token] = h
		}
		_, touched := positions[k]
		if !touched && !slices.EqualFunc(before, after, func(a, b Holder) bool { return a.Token == b.Token && a.Mode == b.Mode }) {
			c.fail("%q changed by an entry not on it: %+v -> %+v", k, before, after)
		}
		for _, h := range after {
			if h.Token == 0 {
				continue // a value without a token
			}
			p, kept := byToken[h.Token]
			if kept {
				if p.Owner != h.Owner || p.Session != h.Session || p.Slot != h.Slot || p.Kind != h.Kind {
					c.fail("%q: token %d now %s/s%d/slot%d, was %s/s%d/slot%d", k, h.Token, h.Owner, h.Session, h.Slot, p.Owner, p.Session, p.Slot)
				}
				if p.Mode != h.Mode {
					downgrade := p.Mode == ModeWrite && h.Mode == ModeRead && slices.ContainsFunc(all, func(r *Result) bool {
						return r.Cmd.Op == OpAcquire && r.Cmd.Key == k && r.Cmd.Mode == ModeRead && r.Cmd.Owner == h.Owner && r.Cmd.Session == h.Session && r.Code == Renewed
					})
					if !downgrade {
						c.fail("%q: holder %s went from %s to %s", k, h.Owner, p.Mode, h.Mode)
					}
				}
				continue
			}
			// A new grant.
			if !slices.Contains(positions[k], h.Token) {
				c.fail("%q: new holder %s has token %d, not a position of the entry %v", k, h.Owner, h.Token, positions[k])
			}
			if h.Token <= c.lastGrant[k] || h.Token <= c.maxToken {
				c.fail("%q: new holder %s has token %d, not above the key's earlier grants (%d) and every earlier token (%d)", k, h.Owner, h.Token, c.lastGrant[k], c.maxToken)
			}
			c.lastGrant[k] = h.Token
			newMax = max(newMax, h.Token)
			if h.Mode == ModePermit {
				if c.slot[k] == nil {
					c.slot[k] = map[uint64]uint64{}
				}
				if h.Token <= c.slot[k][h.Slot] {
					c.fail("%q: slot %d token %d after %d", k, h.Slot, h.Token, c.slot[k][h.Slot])
				}
				c.slot[k][h.Slot] = h.Token
			}
		}
		next[k] = after
	}
	c.prev = next
	// Renewals (and downgrades) keep the holder's token. (Within a batch a
	// renewal may be of a grant the same entry made: only one entry per
	// command is checked.)
	for _, r := range all {
		if (r.Code != Renewed && r.Code != Extended) || r.Cmd.Op.IsSession() || c.batched {
			continue
		}
		mine := func(h Holder) bool { return h.Owner == r.Cmd.Owner && h.Session == r.Cmd.Session }
		now := slices.IndexFunc(holdersOf(c.tb, r.Cmd.Key), mine)
		was := slices.IndexFunc(prev[r.Cmd.Key], mine)
		if now < 0 || was < 0 || holdersOf(c.tb, r.Cmd.Key)[now].Token != prev[r.Cmd.Key][was].Token {
			c.fail("%q: %s by %s did not keep its token: before %+v, after %+v", r.Cmd.Key, r.Code, r.Cmd.Owner, prev[r.Cmd.Key], holdersOf(c.tb, r.Cmd.Key))
		}
	}
	if !c.batched {
		c.outcomes(rs, prev)
	}
	if c.tb.maxToken < newMax {
		c.fail("largest token %d below the largest granted %d", c.tb.maxToken, newMax)
	}
	c.maxToken = newMax
}

// notAliased checks that the copies Get and Range return share nothing
// with the table: changing them changes nothing in it.
func (c *sharedChecker) notAliased() {
	c.t.Helper()
	before := c.tb.MarshalSnapshot()
	for _, k := range sharedKeys {
		l, ok := c.tb.Get(k)
		if !ok || l.Shared == nil {
			continue
		}
		h := l.Shared.Holders[0]
		h.Owner, h.Token, h.Mode, h.Slot, h.Session, h.TTL = "changed", h.Token+1, ModeWrite, 7, 99, 1
		l.Shared.Holders[len(l.Shared.Holders)-1] = &Holder{Mode: ModeRead}
		l.Shared.Holders = append(l.Shared.Holders, &Holder{Mode: ModeWrite})
		l.Shared.Permits++
	}
	c.tb.Range(func(_ string, l Lease) {
		if l.Shared != nil {
			l.Shared.Holders[0].Owner = "ranged"
			l.Shared.Permits += 5
		}
	})
	if !bytes.Equal(before, c.tb.MarshalSnapshot()) {
		c.fail("changing Get's or Range's copy changed the table")
	}
}

// restored returns a fresh table restored from a's snapshot, as a follower
// installs it, and checks it has the same snapshot.
func restored(t *testing.T, a *applier, what string) *applier {
	t.Helper()
	snap, err := a.t.Snapshot()
	require.NoError(t, err)
	var sink memSink
	require.NoError(t, snap.Persist(&sink))
	require.Equal(t, a.t.MarshalSnapshot(), sink.Bytes(), what)
	b := &applier{t: New(), index: a.index}
	require.NoError(t, b.t.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))), what)
	require.Equal(t, a.t.MarshalSnapshot(), b.t.MarshalSnapshot(), "%s: restored table", what)
	require.Equal(t, a.t.MaxToken(), b.t.MaxToken(), what)
	return b
}

// sharedRun generates n commands on a fresh table, applying each as an
// entry of its own and checking every entry; at random points it restores
// the table's snapshot into a fresh table and goes on applying every
// command to both, which must agree after every step. It returns the
// commands and their results. Without check it only generates and applies
// them.
func sharedRun(t *testing.T, seed int64, n int, acquireWaiters, check bool) ([]Command, []*Result) {
	rng := rand.New(rand.NewSource(seed))
	g := &sharedGen{rng: rng, acquireWaiters: acquireWaiters}
	a := newApplier()
	chk := newSharedChecker(t, a.t)
	var shadow *applier
	var shadowChk *sharedChecker
	cmds := make([]Command, 0, n)
	results := make([]*Result, 0, n)
	for i := range n {
		what := fmt.Sprintf("seed %d step %d", seed, i)
		c := g.next(a.t)
		chk.what = what + fmt.Sprintf(" (%s on %q)", c.Op, c.Key)
		r := a.apply(t, c)
		if r.Code == Opened {
			g.sessions = append(g.sessions, r.Position)
		}
		cmds, results = append(cmds, c), append(results, r)
		if !check {
			continue
		}
		chk.entry([]*Result{r})
		if i%8 == 0 {
			chk.notAliased()
		}
		if shadow != nil {
			sr := shadow.apply(t, c)
			require.Equal(t, r, sr, "%s: the restored table's result", what)
			require.Equal(t, a.t.MarshalSnapshot(), shadow.t.MarshalSnapshot(), "%s: the restored table", what)
			shadowChk.what = chk.what + " (restored)"
			shadowChk.entry([]*Result{sr})
		}
		if rng.Intn(60) == 0 {
			shadow = restored(t, a, what)
			shadowChk = newSharedChecker(t, shadow.t)
			shadowChk.lastGrant = maps.Clone(chk.lastGrant)
			for k, m := range chk.slot {
				shadowChk.slot[k] = maps.Clone(m)
			}
		}
	}
	return cmds, results
}

// TestSharedPropertyExclusionAndTokens: at no entry does a writer hold
// with another holder, a semaphore have more holders than permits or two
// in one slot; every grant's token is its position, above every earlier
// grant on its key (readers' too) and on its slot; renewals and downgrades
// keep the token; holders under a session exist only while it is open,
// and it lists the key exactly while it holds some of it; a restored table
// goes on exactly as the original.
func TestSharedPropertyExclusionAndTokens(t *testing.T) {
	for seed := int64(1); seed <= 100; seed++ {
		sharedRun(t, seed, 300, true, true)
	}
}

// TestSharedBatchesActAsSeparateEntries applies the commands of a run in
// random batches: every result and the table are the same as one entry
// each, and the checks hold after every batch.
func TestSharedBatchesActAsSeparateEntries(t *testing.T) {
	for seed := int64(1); seed <= 50; seed++ {
		cmds, want := sharedRun(t, seed, 300, true, false)
		rng := rand.New(rand.NewSource(-seed))
		single, batched := newApplier(), newApplier()
		for _, c := range cmds {
			single.apply(t, c)
		}
		chk := newSharedChecker(t, batched.t)
		chk.batched = true
		var got []*Result
		for rest := cmds; len(rest) > 0; {
			n := min(len(rest), 1+rng.Intn(6))
			chk.what = fmt.Sprintf("seed %d batch at command %d", seed, len(got))
			rs := batched.applyBatch(t, rest[:n])
			chk.entry(rs)
			got = append(got, rs...)
			rest = rest[n:]
		}
		require.Equal(t, want, got, "seed %d", seed)
		require.Equal(t, afterPosition(single.t.MarshalSnapshot()), afterPosition(batched.t.MarshalSnapshot()), "seed %d: the tables", seed)
		require.Equal(t, single.t.Position(), batched.t.Position(), "seed %d", seed)
		require.Less(t, batched.t.LastIndex(), single.t.LastIndex(), "seed %d: fewer entries", seed)
	}
}

// TestSharedDeterminism: the same entries give the same snapshot bytes.
func TestSharedDeterminism(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		cmds, _ := sharedRun(t, seed, 400, true, false)
		a, b := newApplier(), newApplier()
		a.t.memMax, b.t.memMax = 2, 2 // exercise forgetting
		for _, c := range cmds {
			a.apply(t, c)
			b.apply(t, c)
		}
		require.Equal(t, a.t.MarshalSnapshot(), b.t.MarshalSnapshot(), "seed %d", seed)
	}
}

// afterPosition is a snapshot without its header and position (floor and
// last index), which differ between a table that applied batches and one
// that did not.
func afterPosition(snap []byte) []byte {
	d := decoder{b: snap[len(snapshotMagic)+1:]}
	d.uvarint()
	d.uvarint()
	return d.b
}

// outcomes checks that each command did what its outcome says: an expiry
// ended the lease it named, a release its owner's grant, a whole-key
// revoke every holder, and a refusal of any kind changed nothing but what
// a hand-off to the entry's waiter did. (Single entries only.)
func (c *sharedChecker) outcomes(rs []*Result, prev map[string][]Holder) {
	c.t.Helper()
	var all []*Result // the commands and a transaction's parts; not a session end's
	for _, r := range rs {
		all = append(all, r)
		if r.Cmd.Op == OpTxn {
			all = append(all, r.Sub...)
		}
	}
	for _, r := range all {
		cmd := r.Cmd
		if cmd.Op == OpTxn || cmd.Op.IsSession() {
			continue
		}
		before, after := prev[cmd.Key], holdersOf(c.tb, cmd.Key)
		handedOff := r.Waiter == WaiterGranted
		has := func(hs []Holder, f func(h Holder) bool) bool { return slices.ContainsFunc(hs, f) }
		switch {
		case cmd.Op == OpAcquire && cmd.Lease != nil && len(before) > 0 && (cmd.Mode == ModeNone) == (before[0].Kind != KindShared) &&
			has(before, func(h Holder) bool { return h.Ref() == *cmd.Lease }):
			// The holder that ran out on the leader ends first. (Only
			// for an acquire of the key's kind: a shared acquire on a
			// plain lock answers Mismatch and leaves it.)
			if has(after, func(h Holder) bool { return h.Ref() == *cmd.Lease }) {
				c.fail("%q: acquire did not end %+v, which ran out: %+v", cmd.Key, *cmd.Lease, after)
			}
		case r.Code == Expired && cmd.Op == OpExpire:
			if has(after, func(h Holder) bool { return h.Ref() == *cmd.Lease }) {
				c.fail("%q: expired %+v still holds: %+v", cmd.Key, *cmd.Lease, after)
			}
		case r.Code == Released && cmd.Op == OpRelease:
			for _, p := range before {
				if p.Owner == cmd.Owner && p.Session == cmd.Session && has(after, func(h Holder) bool { return h.Token == p.Token }) {
					c.fail("%q: released by %s, who still holds: %+v", cmd.Key, cmd.Owner, after)
				}
			}
		case r.Code == Revoked && cmd.Op == OpRevoke && cmd.Owner == "" && (cmd.Lease == nil || cmd.Lease.Token == 0):
			for _, p := range before {
				if has(after, func(h Holder) bool { return h.Token == p.Token }) {
					c.fail("%q: revoked, and %s still holds: %+v", cmd.Key, p.Owner, after)
				}
			}
		case r.Code == Revoked && cmd.Op == OpRevoke:
			if len(after) != len(before)-1 && !handedOff {
				c.fail("%q: revoked one grant, holders %d -> %d", cmd.Key, len(before), len(after))
			}
		case r.Code == Stale || r.Code == NotHolder || r.Code == Held || r.Code == Mismatch || r.Code == NoSession || r.Code == Refused:
			if r.Freed != nil || handedOff {
				continue // an acquire ended a lease that ran out, or the waiter came in
			}
			if !slices.EqualFunc(before, after, func(a, b Holder) bool { return a.Token == b.Token && a.Version == b.Version && a.Mode == b.Mode }) {
				c.fail("%q: %s changed the holders: %+v -> %+v", cmd.Key, r.Code, before, after)
			}
		}
	}
}
