package client_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/redis/go-redis/v9"
)

// newClient returns a client of the test node, closed when the test ends.
func newClient(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	return clientOf(t, addrs, opts...)
}

// rawClient returns a plain go-redis client of the test node, for commands
// the client package does not send (FENCE.REVOKE).
func rawClient(t *testing.T) *redis.Client {
	t.Helper()
	r := redis.NewClient(&redis.Options{Addr: addrs[0], Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t *testing.T, c *client.Client, name string, opts ...client.LeaseOption) *client.Lease {
	t.Helper()
	l, err := c.TryAcquire(ctxT(t, 20*time.Second), name, opts...)
	if err != nil {
		t.Fatalf("TryAcquire(%q): %v", name, err)
	}
	return l
}

func TestTokensIncreaseAcrossHolders(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	var last uint64
	for i := range 5 {
		l := mustAcquire(t, c, "tokens")
		if l.Token() <= last {
			t.Fatalf("holder %d got token %d, not above the previous %d", i, l.Token(), last)
		}
		last = l.Token()
		s, held, err := c.Status(ctx, "tokens")
		if err != nil || !held || s.Owner != l.Owner() || s.Token != l.Token() {
			t.Fatalf("Status = %+v, %v, %v; want held by %q with token %d", s, held, err, l.Owner(), l.Token())
		}
		if ok, err := c.Check(ctx, "tokens", l.Token()); err != nil || !ok {
			t.Fatalf("Check(current token) = %v, %v", ok, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if !errors.Is(l.Err(), client.ErrReleased) {
			t.Fatalf("after Release, Err = %v, want ErrReleased", l.Err())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("a second Release: %v", err)
		}
	}
	if _, held, err := c.Status(ctx, "tokens"); err != nil || held {
		t.Fatalf("after the last release Status says held %v (%v)", held, err)
	}
}

func TestTryAcquireHeldIsErrLocked(t *testing.T) {
	c := newClient(t)
	l := mustAcquire(t, c, "held")
	defer l.Release(context.Background())
	_, err := c.TryAcquire(ctxT(t, 10*time.Second), "held")
	if !errors.Is(err, client.ErrLocked) {
		t.Fatalf("TryAcquire of a held lock = %v, want ErrLocked", err)
	}
	for _, other := range []error{client.ErrLeaseLost, client.ErrNoLeader, client.ErrInvalidArgument, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, other) {
			t.Errorf("ErrLocked error %v also matches %v", err, other)
		}
	}
}

// Each kind of failure gets its own error, and only that one.
func TestErrorsAreDistinct(t *testing.T) {
	c := newClient(t)
	all := []error{client.ErrLocked, client.ErrLeaseLost, client.ErrNoLeader, client.ErrInvalidArgument,
		client.ErrClosed, context.Canceled, context.DeadlineExceeded}
	only := func(t *testing.T, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("error %v does not match %v", err, want)
		}
		for _, other := range all {
			if other != want && errors.Is(err, other) {
				t.Errorf("error %v matches %v as well as %v", err, other, want)
			}
		}
	}
	t.Run("invalid argument: empty name", func(t *testing.T) {
		_, err := c.TryAcquire(ctxT(t, 10*time.Second), "")
		only(t, err, client.ErrInvalidArgument)
	})
	t.Run("invalid argument: TTL below the server's minimum", func(t *testing.T) {
		_, err := c.TryAcquire(ctxT(t, 10*time.Second), "short", client.WithTTL(50*time.Millisecond))
		only(t, err, client.ErrInvalidArgument)
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := c.Acquire(ctx, "cancelled")
		only(t, err, context.Canceled)
	})
	t.Run("no leader reachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := ln.Addr().String()
		ln.Close() // nothing listens there now
		d, err := client.New([]string{dead}, client.WithFailoverTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		_, err = d.TryAcquire(ctxT(t, 20*time.Second), "nobody")
		only(t, err, client.ErrNoLeader)
	})
	t.Run("closed", func(t *testing.T) {
		d, err := client.New(addrs)
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		_, err = d.TryAcquire(ctxT(t, 10*time.Second), "closed")
		only(t, err, client.ErrClosed)
	})
	t.Run("lease lost", func(t *testing.T) {
		l := mustAcquire(t, c, "lost")
		revoke(t, "lost")
		only(t, l.Extend(ctxT(t, 10*time.Second)), client.ErrLeaseLost)
		only(t, l.Err(), client.ErrLeaseLost)
		only(t, l.Release(ctxT(t, 10*time.Second)), client.ErrLeaseLost)
	})
}

// revoke force-frees name on the server, as an operator would.
func revoke(t *testing.T, name string) {
	t.Helper()
	n, err := rawClient(t).Do(ctxT(t, 10*time.Second), "FENCE.REVOKE", name).Int()
	if err != nil || n != 1 {
		t.Fatalf("FENCE.REVOKE %s = %d, %v", name, n, err)
	}
}

// slowReplies delays every read from the server by delay: a slow network,
// which a real server on loopback cannot be made to have on demand.
type slowReplies struct {
	net.Conn
	delay time.Duration
}

func (c slowReplies) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	time.Sleep(c.delay)
	return n, err
}

// The client counts a lease's validity from just before it sent the
// request, so time spent on the way back comes off the validity.
func TestValidityCountsFromBeforeTheRequest(t *testing.T) {
	const delay = 500 * time.Millisecond
	var d net.Dialer
	c := newClient(t, client.WithDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		return slowReplies{conn, delay}, err
	}))
	const ttl = 4 * time.Second
	before := time.Now()
	l := mustAcquire(t, c, "slow", client.WithTTL(ttl))
	after := time.Now()
	defer l.Release(context.Background())
	if after.Sub(before) < delay {
		t.Fatalf("acquire took %v, less than the injected delay", after.Sub(before))
	}
	allowance := ttl/100 + 2*time.Millisecond
	if u := l.Until(); u.After(after.Add(ttl-allowance-delay)) || u.Before(before.Add(ttl-allowance)) {
		t.Fatalf("Until is %v after the call returned; want at most TTL - allowance - delay = %v",
			u.Sub(after), ttl-allowance-delay)
	}
}

func TestLeaseEndsWhenValidityRunsOut(t *testing.T) {
	c := newClient(t)
	const ttl = 400 * time.Millisecond
	l := mustAcquire(t, c, "expires", client.WithTTL(ttl))
	select {
	case <-l.Done():
		t.Fatal("lease ended at once")
	default:
	}
	select {
	case <-l.Done():
	case <-time.After(ttl + 2*time.Second):
		t.Fatalf("lease context not cancelled %v after a TTL of %v", 2*time.Second, ttl)
	}
	if time.Now().Before(l.Until()) {
		t.Fatalf("lease context cancelled before its validity ended (%v)", l.Until())
	}
	if !errors.Is(context.Cause(l.Context()), client.ErrLeaseLost) {
		t.Fatalf("cause = %v, want ErrLeaseLost", context.Cause(l.Context()))
	}
}

func TestAutoRenewKeepsTheLease(t *testing.T) {
	c := newClient(t)
	const ttl = time.Second
	l := mustAcquire(t, c, "renewed", client.WithTTL(ttl), client.WithAutoRenew())
	select {
	case <-l.Done():
		t.Fatalf("lease lost while renewed: %v", l.Err())
	case <-time.After(5 * ttl):
	}
	s, held, err := c.Status(ctxT(t, 10*time.Second), "renewed")
	if err != nil || !held || s.Token != l.Token() || s.Owner != l.Owner() {
		t.Fatalf("after 5 TTLs Status = %+v, %v, %v; want still held with token %d", s, held, err, l.Token())
	}
	if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(l.Context()), client.ErrReleased) {
		t.Fatalf("cause after Release = %v", context.Cause(l.Context()))
	}
}

// A revoked lease (the server ends it) is lost at the next renewal.
func TestAutoRenewNoticesLoss(t *testing.T) {
	c := newClient(t)
	const ttl = 3 * time.Second
	l := mustAcquire(t, c, "revoked", client.WithTTL(ttl), client.WithAutoRenew())
	revoke(t, "revoked")
	start := time.Now()
	select {
	case <-l.Done():
	case <-time.After(ttl):
		t.Fatal("a revoked lease was not lost within its TTL")
	}
	if !errors.Is(l.Err(), client.ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", l.Err())
	}
	if elapsed := time.Since(start); elapsed > ttl/3+time.Second {
		t.Logf("loss noticed after %v (renewals every %v)", elapsed, ttl/3)
	}
}

// A client given a dead address first moves on to the live one.
func TestFailsOverToTheNextAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	c, err := client.New([]string{dead, addrs[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := mustAcquire(t, c, "failover")
	if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestCloseEndsLeases(t *testing.T) {
	c, err := client.New(addrs)
	if err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, c, "closing", client.WithAutoRenew())
	c.Close()
	select {
	case <-l.Done():
	case <-time.After(time.Second):
		t.Fatal("Close left the lease's context alive")
	}
	if !errors.Is(l.Err(), client.ErrClosed) {
		t.Fatalf("Err = %v, want ErrClosed", l.Err())
	}
}

// Leases of the same client are independent.
func TestConcurrentLeases(t *testing.T) {
	c := newClient(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			l, err := c.TryAcquire(ctx, "many-"+string(rune('a'+i)), client.WithAutoRenew())
			if err != nil {
				errs <- err
				return
			}
			errs <- l.Release(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
