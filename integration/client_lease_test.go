package integration

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
)

// Holders of one lock, each its own client as if each were its own process,
// get strictly increasing tokens, Lease and Mutex alike.
func TestClientTokensIncreaseAcrossHolders(t *testing.T) {
	d := startFencerd(t)
	const holders = 4
	var mu sync.Mutex
	var tokens []uint64
	var wg sync.WaitGroup
	for i := range holders {
		c := clNew(t, []string{d.addr})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				ctx := clCtx(t, requestTimeout)
				var tok uint64
				var unlock func() error
				if i%2 == 0 {
					l, err := c.Acquire(ctx, "turns", client.WithTTL(5*time.Second))
					if err != nil {
						t.Errorf("holder %d: Acquire: %v", i, err)
						return
					}
					tok, unlock = l.Token(), func() error { return l.Release(ctx) }
				} else {
					m := c.NewMutex("turns", client.WithExpiry(5*time.Second), client.WithTries(200), client.WithRetryDelay(100*time.Millisecond))
					if err := m.LockContext(ctx); err != nil {
						t.Errorf("holder %d: Lock: %v", i, err)
						return
					}
					tok, unlock = m.Token(), func() error { _, err := m.UnlockContext(ctx); return err }
				}
				// Recorded while the lock is held, so the order of the
				// records is the order of the grants.
				mu.Lock()
				tokens = append(tokens, tok)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				if err := unlock(); err != nil {
					t.Errorf("holder %d: release: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(tokens) != holders*3 {
		t.Fatalf("%d grants, want %d", len(tokens), holders*3)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("grant %d has token %d, not above the previous grant's %d (all: %v)", i, tokens[i], tokens[i-1], tokens)
		}
	}
}

// Auto-renewal keeps a lease alive for many TTLs, while others are refused.
func TestClientAutoRenewHoldsForManyTTLs(t *testing.T) {
	d := startFencerd(t)
	c := clNew(t, []string{d.addr})
	other := clNew(t, []string{d.addr})
	const ttl = 1500 * time.Millisecond
	l, err := c.TryAcquire(clCtx(t, requestTimeout), "renewed", client.WithTTL(ttl), client.WithAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(10 * ttl)
	for time.Now().Before(end) {
		select {
		case <-l.Done():
			t.Fatalf("lease ended while renewed: %v", l.Err())
		case <-time.After(ttl):
		}
		if _, err := other.TryAcquire(clCtx(t, requestTimeout), "renewed"); !errors.Is(err, client.ErrLocked) {
			t.Fatalf("another owner's TryAcquire = %v, want ErrLocked", err)
		}
		s, held, err := c.Status(clCtx(t, requestTimeout), "renewed")
		if err != nil || !held || s.Token != l.Token() || s.Owner != l.Owner() {
			t.Fatalf("Status = %+v, %v, %v; want held by the lease (token %d)", s, held, err, l.Token())
		}
	}
	if err := l.Release(clCtx(t, requestTimeout)); err != nil {
		t.Fatal(err)
	}
}

// A client whose only node is stopped (SIGSTOP: no replies, no closed
// connections) cancels its lease's context within one TTL of being cut
// off, because its validity, counted from before its last successful
// renewal was sent, runs out.
func TestClientLeaseContextEndsWithinOneTTLAfterCutOff(t *testing.T) {
	d := startFencerd(t)
	c := clNew(t, []string{d.addr})
	const ttl = 2 * time.Second
	l, err := c.TryAcquire(clCtx(t, requestTimeout), "cut-off", client.WithTTL(ttl), client.WithAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	// Let a renewal or two go through first.
	first := l.Until()
	deadline := time.Now().Add(5 * ttl)
	for !l.Until().After(first) {
		if time.Now().After(deadline) {
			t.Fatalf("no renewal within %v", 5*ttl)
		}
		time.Sleep(20 * time.Millisecond)
	}

	cut := time.Now()
	d.clStop(t)
	select {
	case <-l.Done():
	case <-time.After(ttl + 2*time.Second):
		t.Fatalf("lease context still alive %v after the node was stopped (TTL %v)", time.Since(cut), ttl)
	}
	doneAt := time.Now()
	took := doneAt.Sub(cut)
	t.Logf("lease context cancelled %v after SIGSTOP (TTL %v)", took.Round(time.Millisecond), ttl)
	if !errors.Is(l.Err(), client.ErrLeaseLost) {
		t.Fatalf("cause = %v, want ErrLeaseLost", l.Err())
	}
	// Exact: the validity was counted from before a request sent before the
	// cut, so it ended within one TTL of the cut (less the drift allowance).
	if u := l.Until(); u.After(cut.Add(ttl)) {
		t.Fatalf("validity ran to %v after the cut, more than the TTL", u.Sub(cut))
	}
	// And the context followed the validity promptly.
	if late := doneAt.Sub(l.Until()); late > time.Second {
		t.Fatalf("context cancelled %v after the validity ended", late)
	}
}

// Lock on a contended lock is served in order of arrival, and a waiter
// sends no polling traffic: one acquire to find the lock held, then one
// wait, renewed about every TTL/4 to keep its place.
func TestClientLockIsFIFOWithoutPolling(t *testing.T) {
	d := startFencerd(t)
	holder := clNew(t, []string{d.addr})
	h, err := holder.TryAcquire(clCtx(t, requestTimeout), "queue", client.WithTTL(10*time.Second), client.WithAutoRenew())
	if err != nil {
		t.Fatal(err)
	}

	const waiters = 3
	const expiry = 10 * time.Second // waits of 5s, renewed every 2.5s
	type served struct {
		who        int
		token      uint64
		waited     time.Duration
		commands   int64
		acquires   int64
		handshakes int64
	}
	order := make(chan served, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		var n clCounter
		c := clNew(t, []string{d.addr}, n.dialer())
		m := c.NewMutex("queue", client.WithExpiry(expiry), client.WithTries(241), client.WithRetryDelay(250*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			if err := m.LockContext(clCtx(t, 2*time.Minute)); err != nil {
				t.Errorf("waiter %d: Lock: %v", i, err)
				return
			}
			order <- served{i, m.Token(), time.Since(start), n.commands.Load(), n.acquires.Load(), n.handshakes.Load()}
			time.Sleep(500 * time.Millisecond)
			if ok, err := m.UnlockContext(clCtx(t, requestTimeout)); !ok || err != nil {
				t.Errorf("waiter %d: Unlock: %v, %v", i, ok, err)
			}
		}()
		time.Sleep(time.Second) // the next one arrives well after this one queued
	}
	if err := h.Release(clCtx(t, requestTimeout)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	next, last := 0, h.Token()
	for s := range order {
		t.Logf("waiter %d: waited %v, sent %d commands (%d acquires) on %d connections, token %d",
			s.who, s.waited.Round(time.Millisecond), s.commands, s.acquires, s.handshakes, s.token)
		if s.who != next {
			t.Errorf("grant %d went to waiter %d, want arrival order", next, s.who)
		}
		if s.token <= last {
			t.Errorf("waiter %d: token %d not above %d", s.who, s.token, last)
		}
		// One acquire to find the lock held, one wait, and one more wait
		// for every TTL/4 spent waiting; a poller (redsync: every 50-250ms)
		// would send one every few hundred milliseconds.
		if most := 2 + int64(s.waited/(expiry/4)); s.acquires > most || s.commands != s.acquires {
			t.Errorf("waiter %d sent %d commands (%d acquires) in %v; want only acquires, at most %d",
				s.who, s.commands, s.acquires, s.waited, most)
		}
		next, last = next+1, s.token
	}
	if next != waiters {
		t.Fatalf("%d of %d waiters served", next, waiters)
	}
}

// Closing a client ends its own leases (their contexts), not another
// client's, and leaves its locks to expire on the server.
func TestClientCloseEndsOnlyItsOwnLeases(t *testing.T) {
	d := startFencerd(t)
	a, err := client.New([]string{d.addr})
	if err != nil {
		t.Fatal(err)
	}
	b := clNew(t, []string{d.addr})
	la, err := a.TryAcquire(clCtx(t, requestTimeout), "a", client.WithAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.TryAcquire(clCtx(t, requestTimeout), "b", client.WithAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if !errors.Is(la.Err(), client.ErrClosed) {
		t.Fatalf("closed client's lease: Err = %v", la.Err())
	}
	if lb.Err() != nil {
		t.Fatalf("other client's lease ended: %v", lb.Err())
	}
	// The closed client's lock stays held until its TTL passes.
	s, held, err := b.Status(clCtx(t, requestTimeout), "a")
	if err != nil || !held || s.Token != la.Token() {
		t.Fatalf("Status(a) = %+v, %v, %v", s, held, err)
	}
}
