package client_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
)

// holder is one element of FENCE.HOLDERS.
type holder struct {
	owner   string
	token   uint64
	session int64
	mode    string
	slot    int
}

// holders lists name's holders as the server records them.
func holders(t *testing.T, name string) []holder {
	t.Helper()
	v, err := rawClient(t).Do(ctxT(t, 10*time.Second), "FENCE.HOLDERS", name).Slice()
	if err != nil {
		t.Fatalf("FENCE.HOLDERS %s: %v", name, err)
	}
	var out []holder
	for _, e := range v {
		f, ok := e.([]any)
		if !ok || len(f) != 6 {
			t.Fatalf("FENCE.HOLDERS %s: element %v", name, e)
		}
		owner, _ := f[0].(string)
		tok, _ := f[1].(int64)
		sess, _ := f[3].(int64)
		mode, _ := f[4].(string)
		slot, _ := f[5].(int64)
		out = append(out, holder{owner, uint64(tok), sess, mode, int(slot)})
	}
	return out
}

// holds reports whether l's owner holds name with l's token in mode.
func holds(t *testing.T, name string, l *client.Lease, mode string) bool {
	t.Helper()
	for _, h := range holders(t, name) {
		if h.owner == l.Owner() && h.token == l.Token() && h.mode == mode {
			return true
		}
	}
	return false
}

// acquired runs acquire in the background; the channel yields its lease,
// or nil after the test was told of the error.
func acquired(t *testing.T, acquire func(context.Context) (*client.Lease, error)) <-chan *client.Lease {
	t.Helper()
	ch := make(chan *client.Lease, 1)
	ctx := ctxT(t, 30*time.Second)
	go func() {
		l, err := acquire(ctx)
		if err != nil {
			t.Errorf("waiting acquire: %v", err)
		}
		ch <- l
	}()
	return ch
}

// notYet fails the test if ch yields within d.
func notYet(t *testing.T, ch <-chan *client.Lease, d time.Duration, what string) {
	t.Helper()
	select {
	case l := <-ch:
		t.Fatalf("%s was granted (%v) while it should wait", what, l != nil)
	case <-time.After(d):
	}
}

// within returns what ch yields within d, or fails the test.
func within(t *testing.T, ch <-chan *client.Lease, d time.Duration, what string) *client.Lease {
	t.Helper()
	select {
	case l := <-ch:
		if l == nil {
			t.Fatalf("%s failed", what)
		}
		return l
	case <-time.After(d):
		t.Fatalf("%s was not granted within %v", what, d)
	}
	return nil
}

func release(t *testing.T, l *client.Lease) {
	t.Helper()
	if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Release %s: %v", l.Name(), err)
	}
}

// Readers hold together, with different tokens; a writer waits for all of
// them and gets a token above theirs.
func TestRWMutexReadersOverlapWriterWaits(t *testing.T) {
	c := newClient(t)
	m := c.NewRWMutex("rw-overlap")
	ctx := ctxT(t, 30*time.Second)
	r1, err := m.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m.TryRLock(ctx)
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	if r1.Token() == r2.Token() || r1.Slot() != -1 {
		t.Fatalf("readers' tokens %d and %d, slot %d", r1.Token(), r2.Token(), r1.Slot())
	}
	if !holds(t, "rw-overlap", r1, "read") || !holds(t, "rw-overlap", r2, "read") {
		t.Fatalf("holders %+v lack the two readers", holders(t, "rw-overlap"))
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, client.ErrLocked) {
		t.Fatalf("TryLock under readers = %v, want ErrLocked", err)
	}
	w := acquired(t, m.Lock)
	notYet(t, w, time.Second, "the writer under two readers")
	// A reader arriving behind the waiting writer queues too.
	if _, err := m.TryRLock(ctx); !errors.Is(err, client.ErrLocked) {
		t.Fatalf("TryRLock behind a waiting writer = %v, want ErrLocked", err)
	}
	release(t, r1)
	notYet(t, w, time.Second, "the writer under one reader")
	release(t, r2)
	wl := within(t, w, 10*time.Second, "the writer")
	defer release(t, wl)
	if wl.Token() <= max(r1.Token(), r2.Token()) {
		t.Fatalf("writer's token %d is not above the readers' %d, %d", wl.Token(), r1.Token(), r2.Token())
	}
	if hs := holders(t, "rw-overlap"); len(hs) != 1 || hs[0].mode != "write" || hs[0].token != wl.Token() {
		t.Fatalf("holders under the writer: %+v", hs)
	}
	if _, err := m.TryRLock(ctx); !errors.Is(err, client.ErrLocked) {
		t.Fatalf("TryRLock under the writer = %v, want ErrLocked", err)
	}
}

// Downgrade keeps the token and lets a waiting reader in; a read lease
// cannot be downgraded, nor upgraded.
func TestRWMutexDowngradeAndNoUpgrade(t *testing.T) {
	c := newClient(t)
	m := c.NewRWMutex("rw-down")
	ctx := ctxT(t, 30*time.Second)
	w, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := acquired(t, m.RLock)
	notYet(t, r, time.Second, "a reader under the writer")
	if err := w.Downgrade(ctx); err != nil {
		t.Fatalf("Downgrade: %v", err)
	}
	if w.Err() != nil || !holds(t, "rw-down", w, "read") {
		t.Fatalf("after Downgrade: Err %v, holders %+v; want a reader with token %d", w.Err(), holders(t, "rw-down"), w.Token())
	}
	rl := within(t, r, 10*time.Second, "the reader after the downgrade")
	if rl.Token() <= w.Token() {
		t.Fatalf("reader's token %d not above the downgraded writer's %d", rl.Token(), w.Token())
	}
	if err := w.Downgrade(ctx); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Downgrade of a read lease = %v, want ErrInvalidArgument", err)
	}
	// Upgrade: the reader's owner asks for the write lock.
	_, err = c.NewRWMutex("rw-down", client.WithOwner(rl.Owner())).TryLock(ctx)
	if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "upgraded") {
		t.Fatalf("upgrade = %v, want ErrInvalidArgument saying it cannot be upgraded", err)
	}
	if rl.Err() != nil || !holds(t, "rw-down", rl, "read") {
		t.Fatalf("the refused upgrade cost the reader its lock: %v, %+v", rl.Err(), holders(t, "rw-down"))
	}
	release(t, w)
	release(t, rl)
	if hs := holders(t, "rw-down"); len(hs) != 0 {
		t.Fatalf("holders after both released: %+v", hs)
	}
	// A plain lease cannot be downgraded either.
	p := mustAcquire(t, c, "rw-down-plain")
	defer release(t, p)
	if err := p.Downgrade(ctx); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Downgrade of a plain lease = %v, want ErrInvalidArgument", err)
	}
}

// A key is of one kind while held.
func TestSharedWrongType(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	p := mustAcquire(t, c, "kind-plain")
	defer release(t, p)
	if _, err := c.NewRWMutex("kind-plain").TryRLock(ctx); !errors.Is(err, client.ErrWrongType) {
		t.Fatalf("RLock of a plain lock = %v, want ErrWrongType", err)
	}
	if _, err := c.NewSemaphore("kind-plain", 2).TryAcquire(ctx); !errors.Is(err, client.ErrWrongType) {
		t.Fatalf("semaphore on a plain lock = %v, want ErrWrongType", err)
	}
	r, err := c.NewRWMutex("kind-rw").TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, r)
	if _, err := c.TryAcquire(ctx, "kind-rw"); !errors.Is(err, client.ErrWrongType) {
		t.Fatalf("plain acquire of a read-write lock = %v, want ErrWrongType", err)
	}
	if _, err := c.TryAcquireAll(ctx, []string{"kind-free", "kind-rw"}); !errors.Is(err, client.ErrWrongType) {
		t.Fatalf("AcquireAll with a read-write lock = %v, want ErrWrongType", err)
	}
	if hs := holders(t, "kind-free"); len(hs) != 0 {
		t.Fatalf("a refused AcquireAll took kind-free: %+v", hs)
	}
}

// Permits take the lowest free slots; a fourth acquirer of three permits
// waits until one is released, and gets its slot with a larger token.
func TestSemaphoreSlotsAndWaiting(t *testing.T) {
	c := newClient(t)
	s := c.NewSemaphore("sem-3", 3)
	ctx := ctxT(t, 30*time.Second)
	var ps []*client.Lease
	for i := range 3 {
		p, err := s.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("permit %d: %v", i, err)
		}
		if p.Slot() != i || i > 0 && p.Token() <= ps[i-1].Token() {
			t.Fatalf("permit %d: slot %d, token %d", i, p.Slot(), p.Token())
		}
		ps = append(ps, p)
	}
	if _, err := s.TryAcquire(ctx); !errors.Is(err, client.ErrLocked) {
		t.Fatalf("a fourth TryAcquire = %v, want ErrLocked", err)
	}
	if _, err := c.NewSemaphore("sem-3", 4).TryAcquire(ctx); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("an acquire with 4 permits of a 3-permit semaphore = %v, want ErrInvalidArgument", err)
	}
	fourth := acquired(t, s.Acquire)
	notYet(t, fourth, time.Second, "a fourth permit")
	if hs := holders(t, "sem-3"); len(hs) != 3 {
		t.Fatalf("holders with one waiting: %+v", hs)
	}
	release(t, ps[1])
	p4 := within(t, fourth, 10*time.Second, "the fourth permit")
	if p4.Slot() != 1 || p4.Token() <= ps[2].Token() {
		t.Fatalf("the fourth permit has slot %d and token %d; want slot 1 and a token above %d", p4.Slot(), p4.Token(), ps[2].Token())
	}
	if !holds(t, "sem-3", p4, "permit") {
		t.Fatalf("holders %+v lack the fourth permit", holders(t, "sem-3"))
	}
	for _, p := range []*client.Lease{ps[0], ps[2], p4} {
		release(t, p)
	}
	if hs := holders(t, "sem-3"); len(hs) != 0 {
		t.Fatalf("holders after every release: %+v", hs)
	}
	if mustAcquire(t, c, "sem-plain").Slot() != -1 {
		t.Fatal("a plain lease has a slot")
	}
}

// AcquireAll takes every key with one token, or none of them.
func TestAcquireAllOneTokenAllOrNothing(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	keys := []string{"all-a", "all-b", "all-c"}
	b := mustAcquire(t, c, "all-b")
	if _, err := c.TryAcquireAll(ctx, keys); !errors.Is(err, client.ErrLocked) {
		t.Fatalf("TryAcquireAll with all-b held = %v, want ErrLocked", err)
	}
	for _, k := range []string{"all-a", "all-c"} {
		if hs := holders(t, k); len(hs) != 0 {
			t.Fatalf("a refused TryAcquireAll holds %s: %+v", k, hs)
		}
	}
	waiting := acquired(t, func(ctx context.Context) (*client.Lease, error) {
		return c.AcquireAll(ctx, append(keys, "all-a"))
	})
	notYet(t, waiting, time.Second, "AcquireAll with all-b held")
	release(t, b)
	l := within(t, waiting, 10*time.Second, "AcquireAll")
	if !slices.Equal(l.Names(), keys) || l.Name() != "all-a" {
		t.Fatalf("Names %v, Name %q", l.Names(), l.Name())
	}
	if l.Token() <= b.Token() {
		t.Fatalf("token %d not above all-b's earlier %d", l.Token(), b.Token())
	}
	for _, k := range keys {
		if hs := holders(t, k); len(hs) != 1 || hs[0].token != l.Token() || hs[0].owner != l.Owner() || hs[0].mode != "lock" {
			t.Fatalf("holders of %s: %+v; want the set's owner with token %d", k, hs, l.Token())
		}
	}
	if err := l.Extend(ctx); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	release(t, l)
	for _, k := range keys {
		if hs := holders(t, k); len(hs) != 0 {
			t.Fatalf("holders of %s after Release: %+v", k, hs)
		}
	}
	if _, err := c.TryAcquireAll(ctx, nil); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("TryAcquireAll of no keys = %v", err)
	}
}

// Every kind of lease stays alive with WithAutoRenew past three TTLs.
func TestSharedLeasesAutoRenew(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	const ttl = time.Second
	opts := []client.LeaseOption{client.WithTTL(ttl), client.WithAutoRenew()}
	r, err := c.NewRWMutex("renew-r", opts...).TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.NewRWMutex("renew-w", opts...).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.NewSemaphore("renew-s", 2, opts...).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.TryAcquireAll(ctx, []string{"renew-m1", "renew-m2"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	leases := []*client.Lease{r, w, p, m}
	time.Sleep(3*ttl + ttl/2)
	for _, l := range leases {
		if l.Err() != nil {
			t.Fatalf("%v lost while renewed: %v", l.Names(), l.Err())
		}
	}
	for _, x := range []struct {
		name, mode string
		l          *client.Lease
	}{{"renew-r", "read", r}, {"renew-w", "write", w}, {"renew-s", "permit", p}, {"renew-m1", "lock", m}, {"renew-m2", "lock", m}} {
		if !holds(t, x.name, x.l, x.mode) {
			t.Fatalf("after 3.5 TTLs %s's holders are %+v", x.name, holders(t, x.name))
		}
	}
	for _, l := range leases {
		release(t, l)
		if !errors.Is(l.Err(), client.ErrReleased) {
			t.Fatalf("Err after Release = %v", l.Err())
		}
	}
}

// A shared or multi-key lease whose lock the server revokes ends at its
// next renewal; the other keys of a set are let go.
func TestSharedLeasesEndWhenRevoked(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	const ttl = 3 * time.Second
	opts := []client.LeaseOption{client.WithTTL(ttl), client.WithAutoRenew()}
	r, err := c.NewRWMutex("revoke-r", opts...).TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.NewSemaphore("revoke-s", 2, opts...).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.TryAcquireAll(ctx, []string{"revoke-m1", "revoke-m2"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	revoke(t, "revoke-r")
	revoke(t, "revoke-s")
	revoke(t, "revoke-m2")
	for _, l := range []*client.Lease{r, p, m} {
		select {
		case <-l.Done():
		case <-time.After(ttl):
			t.Fatalf("%v: a revoked lease was not lost within its TTL", l.Names())
		}
		if !errors.Is(l.Err(), client.ErrLeaseLost) {
			t.Fatalf("%v: Err = %v, want ErrLeaseLost", l.Names(), l.Err())
		}
	}
	// The set's other key is released in the background.
	deadline := time.Now().Add(5 * time.Second)
	for len(holders(t, "revoke-m1")) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("revoke-m1 still held by the lost set: %+v", holders(t, "revoke-m1"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Shared leases held under a session live with it and end with it.
func TestSharedLeasesUnderASession(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	s, err := c.NewSession(ctx, client.WithSessionTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.NewRWMutex("sess-rw", client.WithSession(s)).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.NewSemaphore("sess-s", 2, client.WithSession(s)).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// (AcquireAll under a session is left out: FENCE.MACQUIRE … SESSION
	// is refused, as a transaction's commands carry no session part.)
	if err := w.Downgrade(ctx); err != nil {
		t.Fatalf("Downgrade under a session: %v", err)
	}
	time.Sleep(3 * time.Second) // past the session's TTL: kept alive
	for _, x := range []struct {
		name, mode string
		l          *client.Lease
	}{{"sess-rw", "read", w}, {"sess-s", "permit", p}} {
		hs := holders(t, x.name)
		if x.l.Err() != nil || len(hs) != 1 || hs[0].session != int64(s.ID()) || hs[0].mode != x.mode || hs[0].token != x.l.Token() {
			t.Fatalf("%s: Err %v, holders %+v; want %s under session %d", x.name, x.l.Err(), hs, x.mode, s.ID())
		}
	}
	// Revoking a shared key ends only its lease, at the next keepalive.
	revoke(t, "sess-s")
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked permit's lease did not end")
	}
	if !errors.Is(p.Err(), client.ErrLeaseLost) || w.Err() != nil {
		t.Fatalf("after the permit's revoke: its Err %v, the reader's %v", p.Err(), w.Err())
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Err() == nil || len(holders(t, "sess-rw")) != 0 {
		t.Fatalf("after Close: Err %v, holders %+v", w.Err(), holders(t, "sess-rw"))
	}
}

// Two AcquireAll of the same locks in opposite orders, both waiting, are
// both granted in turn: no deadlock.
func TestAcquireAllOppositeOrdersDoNotDeadlock(t *testing.T) {
	c := newClient(t)
	a := mustAcquire(t, c, "opp-a")
	b := mustAcquire(t, c, "opp-b")
	ab := acquired(t, func(ctx context.Context) (*client.Lease, error) {
		return c.AcquireAll(ctx, []string{"opp-a", "opp-b"}, client.WithTTL(2*time.Second))
	})
	ba := acquired(t, func(ctx context.Context) (*client.Lease, error) {
		return c.AcquireAll(ctx, []string{"opp-b", "opp-a"}, client.WithTTL(2*time.Second))
	})
	notYet(t, ab, 500*time.Millisecond, "AcquireAll a, b")
	release(t, a)
	release(t, b)
	var got []*client.Lease
	for range 2 {
		select {
		case l := <-ab:
			got = append(got, l)
			release(t, l)
		case l := <-ba:
			got = append(got, l)
			release(t, l)
		case <-time.After(10 * time.Second):
			t.Fatal("the opposite-order sets deadlocked")
		}
	}
	if got[0] == nil || got[1] == nil || got[1].Token() <= got[0].Token() {
		t.Fatalf("grants %v", got)
	}
}

// A set's wait keeps its place in every lock's queue across its rounds
// (half the TTL each, overlapping): a single-lock waiter that comes after
// it is served after it, however many rounds the set waited.
func TestAcquireAllKeepsItsPlaceAcrossRounds(t *testing.T) {
	c := newClient(t)
	a := mustAcquire(t, c, "keep-a", client.WithTTL(20*time.Second))
	set := acquired(t, func(ctx context.Context) (*client.Lease, error) {
		// Rounds of 500 ms, a new one every 250 ms.
		return c.AcquireAll(ctx, []string{"keep-a", "keep-b"}, client.WithTTL(time.Second), client.WithAutoRenew())
	})
	time.Sleep(300 * time.Millisecond) // the set is queued for keep-b too
	single := acquired(t, func(ctx context.Context) (*client.Lease, error) {
		return c.Acquire(ctx, "keep-b", client.WithTTL(5*time.Second))
	})
	notYet(t, single, 3*time.Second, "Acquire keep-b (the set is first in its queue)")
	release(t, a)
	s := within(t, set, 10*time.Second, "AcquireAll after about a dozen rounds")
	notYet(t, single, 500*time.Millisecond, "Acquire keep-b while the set holds it")
	release(t, s)
	b := within(t, single, 10*time.Second, "Acquire keep-b after the set's release")
	if b.Token() <= s.Token() {
		t.Fatalf("keep-b's token %d after the set's %d", b.Token(), s.Token())
	}
	release(t, b)
}
