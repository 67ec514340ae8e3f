package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/server"
)

// countingConn counts the FENCE.ACQUIRE commands written on a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.n.Add(int64(bytes.Count(bytes.ToUpper(p), []byte("FENCE.ACQUIRE"))))
	return c.Conn.Write(p)
}

// countAcquires returns a dialer option that counts the client's acquires.
func countAcquires(n *atomic.Int64) client.Option {
	var d net.Dialer
	return client.WithDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{conn, n}, nil
	})
}

// Waiters are served in order of arrival, although with a short TTL each
// of them reissues its wait many times while it waits: a reissued wait
// keeps its place in the line.
func TestAcquireServesWaitersInOrder(t *testing.T) {
	c := newClient(t)
	holder := mustAcquire(t, c, "line", client.WithTTL(10*time.Second), client.WithAutoRenew())

	const waiters = 3
	const ttl = 2 * time.Second // waits of 1s, reissued every 500ms
	type served struct {
		who   int
		token uint64
	}
	order := make(chan served, waiters)
	counts := make([]atomic.Int64, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wc := newClient(t, countAcquires(&counts[i]))
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := wc.Acquire(ctxT(t, 30*time.Second), "line", client.WithTTL(ttl))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- served{i, l.Token()}
			if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
				t.Errorf("waiter %d: release: %v", i, err)
			}
		}()
		// Arrive well after the previous waiter has queued.
		time.Sleep(time.Second)
	}
	if err := holder.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	var last uint64
	i := 0
	for s := range order {
		if s.who != i {
			t.Errorf("grant %d went to waiter %d; want arrival order", i, s.who)
		}
		if s.token <= last {
			t.Errorf("waiter %d's token %d is not above %d", s.who, s.token, last)
		}
		last = s.token
		i++
	}
	if i != waiters {
		t.Fatalf("%d of %d waiters served", i, waiters)
	}
	for i := range counts {
		t.Logf("waiter %d sent %d acquires", i, counts[i].Load())
	}
}

// A waiter that gives up leaves the queue at once: the lock goes to the one
// behind it.
func TestCancelledWaitLeavesTheQueue(t *testing.T) {
	c := newClient(t)
	holder := mustAcquire(t, c, "leaving", client.WithTTL(10*time.Second), client.WithAutoRenew())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, "leaving", client.WithTTL(30*time.Second))
		gone <- err
	}()
	time.Sleep(time.Second)
	next := make(chan *client.Lease, 1)
	go func() {
		l, err := c.Acquire(ctxT(t, 30*time.Second), "leaving", client.WithTTL(30*time.Second))
		if err != nil {
			t.Error(err)
		}
		next <- l
	}()
	time.Sleep(time.Second)
	cancel()
	select {
	case err := <-gone:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, client.ErrLocked) {
			t.Fatalf("cancelled Acquire = %v, want context.Canceled and ErrLocked", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("cancelled Acquire did not return")
	}
	time.Sleep(500 * time.Millisecond) // the server notices the hang-up within 50ms
	released := time.Now()
	if err := holder.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-next:
		if l == nil {
			return
		}
		defer l.Release(context.Background())
		if took := time.Since(released); took > 2*time.Second {
			t.Fatalf("the next waiter got the lock %v after the release", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter behind a cancelled one did not get the lock")
	}
}

func TestAcquireDeadlineWhileHeld(t *testing.T) {
	c := newClient(t)
	holder := mustAcquire(t, c, "deadline")
	defer holder.Release(context.Background())
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := c.Acquire(ctx, "deadline")
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, client.ErrLocked) {
		t.Fatalf("Acquire = %v, want DeadlineExceeded and ErrLocked", err)
	}
	if took < 500*time.Millisecond || took > 2500*time.Millisecond {
		t.Fatalf("Acquire returned after %v, want about 500ms", took)
	}
}

// An owner whose release the server remembers is refused at once, also when
// it would wait: Acquire returns ErrLocked instead of queueing again and
// again.
func TestAcquireByAReleasedOwnerIsRefused(t *testing.T) {
	var sent atomic.Int64
	c := newClient(t, countAcquires(&sent))
	owner := fmt.Sprintf("once-%d", time.Now().UnixNano())
	l := mustAcquire(t, c, "remembered", client.WithOwner(owner))
	if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	sent.Store(0)
	start := time.Now()
	_, err := c.Acquire(ctxT(t, 20*time.Second), "remembered", client.WithOwner(owner))
	if !errors.Is(err, client.ErrLocked) {
		t.Fatalf("Acquire by a released owner = %v, want ErrLocked", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("refusal took %v", took)
	}
	if n := sent.Load(); n > 3 {
		t.Errorf("%d acquires sent; want the first try and two waits", n)
	}
}

// A server that allows only short waits (fencerd --max-wait) refuses the
// client's usual wait of TTL/2; the client falls back to shorter ones.
func TestAcquireAdaptsToTheServersMaxWait(t *testing.T) {
	stop, addr, err := startNode(func(cfg *server.Config) { cfg.MaxWait = time.Second })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c, err := client.New([]string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	holder, err := c.TryAcquire(ctxT(t, 10*time.Second), "short-waits", client.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctxT(t, 20*time.Second), "short-waits", client.WithTTL(10*time.Second))
		if err == nil && l.Token() <= holder.Token() {
			err = fmt.Errorf("token %d after %d", l.Token(), holder.Token())
		}
		got <- err
	}()
	time.Sleep(2 * time.Second)
	if err := holder.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Acquire against --max-wait 1s: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not get the lock within 10s of its release")
	}
}
