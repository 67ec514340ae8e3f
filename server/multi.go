package server

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fencerlock/fencer/fsm"
)

// MaxMultiKeys bounds the keys of one AcquireMany.
const MaxMultiKeys = 64

// MultiAcquire is an acquire of several plain locks at once.
type MultiAcquire struct {
	Keys  []string
	Owner string
	// TTL is each lock's lease. There is no session: a transaction's
	// commands carry no session part (fsm.Txn), so several keys at once
	// are never taken under one.
	TTL time.Duration
	// Wait, if positive, queues the acquire for up to Wait.
	Wait time.Duration
}

// AcquireMany grants every key of a to its owner in one entry, or none:
// the grants share the entry's position as their token. With a wait, the
// acquire takes its place in every key's queue at once and is granted when
// it is first in all of them and all are free; a key it is first for is
// kept for it (later acquires queue behind), so it is not starved, and
// because every queue orders waiters by arrival no two such waits deadlock.
// If owner already holds every key with one token, its acquire renews them
// all and returns that token.
func (n *Node) AcquireMany(ctx context.Context, a MultiAcquire) (g Grant, granted bool, err error) {
	defer func(start time.Time) { n.metrics.observe("acquire", start, granted, err) }(time.Now())
	keys := slices.Clone(a.Keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	switch {
	case len(keys) == 0 || len(keys) > MaxMultiKeys:
		return Grant{}, false, invalid("keys", "%d distinct keys, not 1..%d", len(keys), MaxMultiKeys)
	case a.Wait < 0 || a.Wait > n.cfg.MaxWait:
		return Grant{}, false, invalid("wait", "%v is outside 0..%v", a.Wait, n.cfg.MaxWait)
	}
	for _, k := range keys {
		if err := n.checkLease(k, a.Owner, a.TTL); err != nil {
			return Grant{}, false, err
		}
	}
	if err := n.waitReady(ctx); err != nil {
		return Grant{}, false, err
	}
	m := &waiter{keys: keys, key: keys[0], owner: a.Owner, ttl: uint64(a.TTL / time.Millisecond),
		done: make(chan waitOutcome, 1), wake: make(chan struct{}, 1)}
	waitEnd := time.Now().Add(a.Wait)
	queued := false
	defer func() {
		if queued {
			n.grants.withdrawMany(m)
		}
	}()
	for {
		step := n.grants.planMany(m, a.Wait > 0 && time.Now().Before(waitEnd), &queued)
		switch step.act {
		case actNotReady:
			if err := n.waitReady(ctx); err != nil {
				return Grant{}, false, err
			}
			continue
		case actFail:
			return Grant{}, false, step.err
		case actRefuse:
			return Grant{}, false, nil
		case actQueue:
			timer := time.NewTimer(time.Until(waitEnd))
			select {
			case <-m.wake:
				timer.Stop()
				continue
			case o := <-m.done:
				// Answered: the node stopped leading, a newer round
				// took its place, or the owner released one of its keys.
				timer.Stop()
				queued = false
				return Grant{}, false, o.err
			case <-timer.C:
				return Grant{}, false, nil
			case <-ctx.Done():
				timer.Stop()
				return Grant{}, false, ctx.Err()
			}
		}
		r, err := n.propose(ctx, step.cmd)
		n.grants.grantedMany(m)
		if err != nil {
			return Grant{}, false, err
		}
		switch {
		case step.lost && r.Code == fsm.Applied:
			return Grant{}, false, fmt.Errorf("%w: %s held only some of the keys an earlier attempt was granted (the others ran out or were taken); the rest are released", ErrLeaseLost, a.Owner)
		case r.Code == fsm.Applied && len(r.Sub) > 0 && (r.Sub[0].Code == fsm.Granted || r.Sub[0].Code == fsm.Renewed):
			return Grant{Token: r.Sub[0].Lease.Token, TTL: a.TTL}, true, nil
		case r.Code == fsm.Applied && len(r.Sub) > 0 && r.Sub[0].Code == fsm.NoSession:
			return Grant{}, false, ErrNoSession
		}
		// A guard failed: a key changed between the look and the entry.
		// Look again (a queued wait keeps its place).
	}
}

// planMany decides a multi-key acquire's next step, as plan does for one
// key: the entry (a transaction whose guards are the keys as seen, so
// that it applies only if none changed), a place in every key's queue, a
// refusal, or an error. queued tracks whether m is in the queues.
func (g *grants) planMany(m *waiter, waits bool, queued *bool) acquireStep {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.readyLocked() {
		if *queued {
			g.waits.removeMany(m)
			*queued = false
		}
		return acquireStep{act: actNotReady}
	}
	now := time.Now()
	free, mine := 0, 0
	var token uint64
	for _, k := range m.keys {
		l, held := g.table.Get(k)
		switch {
		case held && l.Kind != fsm.KindString:
			return acquireStep{act: actFail, err: fmt.Errorf("%w (%s)", ErrWrongType, k)}
		case held && l.Owner == m.owner && l.Session == 0 && !g.ranOut(lockTimes(l), now):
			if mine > 0 && l.Token != token {
				return acquireStep{act: actFail, err: invalid("keys", "%s holds them under different tokens", m.owner)}
			}
			mine, token = mine+1, l.Token
		case !held:
			if g.table.Refuses(k, m.owner) {
				return acquireStep{act: actRefuse}
			}
			free++
		}
	}
	if mine > 0 && mine < len(m.keys) {
		// The owner holds some of the keys under one token and not the
		// others: an earlier attempt of this acquire (whose answer was
		// lost: UNCERTAIN) granted them all, and some have since run out
		// or been taken. Its lease is lost: release the keys still held,
		// in one entry guarded on every key as seen, and say so.
		txn := &fsm.Txn{}
		for _, k := range m.keys {
			txn.Guards = append(txn.Guards, g.table.Guard(k))
			if l, held := g.table.Get(k); held && l.Owner == m.owner && l.Token == token {
				txn.Cmds = append(txn.Cmds, fsm.Command{Op: fsm.OpRelease, Key: k, Owner: m.owner})
			}
		}
		return acquireStep{act: actPropose, cmd: fsm.Command{Op: fsm.OpTxn, Txn: txn}, lost: true}
	}
	first := true // m is, or would be, first in every key's queue
	for _, k := range m.keys {
		if h := g.waits.head(k); h != nil && h != m || g.granting[k] {
			first = false
		}
	}
	if (mine == len(m.keys) || free == len(m.keys) && first) && g.readyLocked() {
		for i, k := range m.keys {
			if err := g.checkNewLocked(k, i); err != nil {
				return acquireStep{act: actFail, err: err}
			}
		}
		txn := &fsm.Txn{}
		for _, k := range m.keys {
			txn.Guards = append(txn.Guards, g.table.Guard(k))
			txn.Cmds = append(txn.Cmds, fsm.Command{Op: fsm.OpAcquire, Key: k, Owner: m.owner, TTL: m.ttl})
			if *queued {
				g.granting[k] = true
				m.marked = append(m.marked, k)
			}
		}
		return acquireStep{act: actPropose, cmd: fsm.Command{Op: fsm.OpTxn, Txn: txn}}
	}
	if !waits {
		return acquireStep{act: actRefuse}
	}
	if !*queued {
		// A fresh answer: one a failed earlier queueing got is stale.
		m.done, m.answered = make(chan waitOutcome, 1), false
		g.waits.addMany(m)
		*queued = true
		// In an older wait's place, it may be first now.
		g.wakeManyLocked(m)
	}
	return acquireStep{act: actQueue}
}

// grantedMany ends the grant in flight for m's keys, if any: whatever its
// outcome, the keys' queues go on.
func (g *grants) grantedMany(m *waiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range m.marked {
		delete(g.granting, k)
	}
	m.marked = m.marked[:0]
}

// withdrawMany takes m out of every queue it is in and hands each key it
// kept free to the next waiter.
func (g *grants) withdrawMany(m *waiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waits.removeMany(m)
	for _, k := range m.keys {
		g.grantHeadLocked(k)
	}
}

// wakeManyLocked wakes m's acquire if m may be granted now: first in every
// key's queue, every key free, no grant in flight.
func (g *grants) wakeManyLocked(m *waiter) {
	for _, k := range m.keys {
		if g.table.Has(k) || g.waits.head(k) != m || g.granting[k] {
			return
		}
	}
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// ReleaseMany releases every key of keys that owner holds (under session,
// if not zero) in one entry, each handed to its first waiter there, and
// returns how many it released (counting remembered releases).
func (n *Node) ReleaseMany(ctx context.Context, keys []string, owner string, session uint64) (int, error) {
	if session != 0 {
		return 0, invalid("session", "several keys at once cannot be held under a session")
	}
	giveUp := n.giveUps()
	txn, err := n.manyTxn(ctx, keys, owner, func(k string) fsm.Command {
		// As Release: the owner's waits end, and its give-up is remembered.
		return fsm.Command{Op: fsm.OpRelease, Key: k, Owner: owner, GiveUp: giveUp, Waiter: txnWaiter(n.grants.releasing(k, owner))}
	})
	if err != nil {
		return 0, err
	}
	return n.countMany(ctx, txn, fsm.Released, fsm.AlreadyReleased)
}

// ExtendMany renews owner's lease on every key of keys in one entry and
// returns how many it renewed.
func (n *Node) ExtendMany(ctx context.Context, keys []string, owner string, ttl time.Duration) (int, error) {
	for _, k := range keys {
		if err := n.checkLease(k, owner, ttl); err != nil {
			return 0, err
		}
	}
	txn, err := n.manyTxn(ctx, keys, owner, func(k string) fsm.Command {
		c := fsm.Command{Op: fsm.OpExtend, Key: k, Owner: owner, TTL: uint64(ttl / time.Millisecond)}
		var w *fsm.Waiter
		c.Lease, w = n.grants.expired(k, owner)
		c.Waiter = txnWaiter(w)
		return c
	})
	if err != nil {
		return 0, err
	}
	return n.countMany(ctx, txn, fsm.Extended)
}

// txnWaiter returns w if a transaction's command may carry it: not a
// waiter under a session (a transaction's commands carry no session part);
// such a waiter gets the key from the OpGrant the leader proposes for a
// free key someone waits for.
func txnWaiter(w *fsm.Waiter) *fsm.Waiter {
	if w != nil && w.Session != 0 {
		return nil
	}
	return w
}

// manyTxn checks keys and owner and makes a transaction of one command of
// cmd's for each distinct key, without guards.
func (n *Node) manyTxn(ctx context.Context, keys []string, owner string, cmd func(string) fsm.Command) (fsm.Command, error) {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	if len(keys) == 0 || len(keys) > MaxMultiKeys {
		return fsm.Command{}, invalid("keys", "%d distinct keys, not 1..%d", len(keys), MaxMultiKeys)
	}
	for _, k := range keys {
		if err := n.checkNames(k, owner); err != nil {
			return fsm.Command{}, err
		}
	}
	if err := n.waitReady(ctx); err != nil {
		return fsm.Command{}, err
	}
	txn := &fsm.Txn{}
	for _, k := range keys {
		txn.Cmds = append(txn.Cmds, cmd(k))
	}
	return fsm.Command{Op: fsm.OpTxn, Txn: txn}, nil
}

// countMany commits txn and counts its commands whose outcome is one of
// codes.
func (n *Node) countMany(ctx context.Context, txn fsm.Command, codes ...fsm.Code) (int, error) {
	r, err := n.propose(ctx, txn)
	if err != nil {
		return 0, err
	}
	count := 0
	for _, s := range r.Sub {
		if slices.Contains(codes, s.Code) {
			count++
		}
	}
	return count, nil
}
