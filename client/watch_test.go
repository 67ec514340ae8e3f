package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/server"
)

// nextEvent takes the watch's next event within 10s.
func nextEvent(t *testing.T, w *client.Watch) client.Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("events closed: %v", w.Err())
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return client.Event{}
}

// expect compares an event without its position.
func expect(t *testing.T, got client.Event, kind client.EventKind, owner string, token uint64) {
	t.Helper()
	if got.Kind != kind || got.Owner != owner || got.Token != token {
		t.Fatalf("event %+v, want %s by %q with token %d", got, kind, owner, token)
	}
}

func mustWatch(t *testing.T, c *client.Client, name string, opts ...client.WatchOption) *client.Watch {
	t.Helper()
	w, err := c.Watch(ctxT(t, 60*time.Second), name, opts...)
	if err != nil {
		t.Fatalf("Watch(%q): %v", name, err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func TestWatchDeliversEveryChange(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t, 30*time.Second)
	w := mustWatch(t, c, "watched")
	start := nextEvent(t, w)
	expect(t, start, client.EventReset, "", 0)

	l1 := mustAcquire(t, c, "watched")
	g1 := nextEvent(t, w)
	expect(t, g1, client.EventGranted, l1.Owner(), l1.Token())
	if g1.Position != l1.Token() || g1.Name != "watched" {
		t.Fatalf("grant event %+v: want position %d (the token) and the name", g1, l1.Token())
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	expect(t, nextEvent(t, w), client.EventReleased, l1.Owner(), l1.Token())
	l2 := mustAcquire(t, c, "watched")
	expect(t, nextEvent(t, w), client.EventGranted, l2.Owner(), l2.Token())
	if err := rawClient(t).Do(ctx, "FENCE.REVOKE", "watched").Err(); err != nil {
		t.Fatal(err)
	}
	rev := nextEvent(t, w)
	expect(t, rev, client.EventRevoked, l2.Owner(), l2.Token())

	// A second watch resumed from the first grant gets the rest.
	again := mustWatch(t, c, "watched", client.WatchFrom(g1.Position))
	expect(t, nextEvent(t, again), client.EventReleased, l1.Owner(), l1.Token())
	expect(t, nextEvent(t, again), client.EventGranted, l2.Owner(), l2.Token())
	if ev := nextEvent(t, again); ev != rev {
		t.Fatalf("resumed watch: %+v, want %+v", ev, rev)
	}

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-w.Events(); ok {
		t.Fatal("events not closed by Close")
	}
	if w.Err() != nil {
		t.Fatalf("Err after Close = %v", w.Err())
	}
}

func TestWatchEndsWithItsContext(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx, "ctx-watch")
	if err != nil {
		t.Fatal(err)
	}
	nextEvent(t, w)
	cancel()
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the watch outlived its context")
	}
	if !errors.Is(w.Err(), context.Canceled) {
		t.Fatalf("Err = %v, want context.Canceled", w.Err())
	}
}

func TestWatchRefusals(t *testing.T) {
	c := newClient(t)
	_, err := c.Watch(ctxT(t, 10*time.Second), strings.Repeat("k", 2000))
	if !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("a name over the limit: %v, want ErrInvalidArgument", err)
	}
	if _, err := c.Watch(ctxT(t, 10*time.Second), ""); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("an empty name: %v, want ErrInvalidArgument", err)
	}
}

// cutter is a dialer whose first connection is cut right after the first
// "released" event arrives, dropping whatever came after it in the same
// read (the hand-off's grant, at the same position).
type cutter struct {
	mu    sync.Mutex
	dials int
}

func (d *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dials++
	if d.dials > 1 {
		return conn, nil
	}
	return &cutConn{Conn: conn}, nil
}

type cutConn struct {
	net.Conn
	cut bool
}

func (c *cutConn) Read(p []byte) (int, error) {
	if c.cut {
		return 0, errors.New("cut by the test")
	}
	n, err := c.Conn.Read(p)
	mark := []byte("$8\r\nreleased\r\n")
	if i := bytes.Index(p[:n], mark); i >= 0 {
		// The rest of the event: position, owner (a bulk string: two
		// lines) and token.
		end := i + len(mark)
		for lines := 0; lines < 4; lines++ {
			j := bytes.Index(p[end:n], []byte("\r\n"))
			if j < 0 {
				break // (the test then fails: the event came in pieces)
			}
			end += j + 2
		}
		c.cut = true
		_ = c.Conn.Close()
		return end, nil
	}
	return n, err
}

// A connection lost between two events of one command (a release and the
// hand-off to a waiter) resumes with the second: nothing twice, nothing
// skipped.
func TestWatchResumesInsideACommand(t *testing.T) {
	d := &cutter{}
	c := newClient(t, client.WithDialer(d.dial))
	ctx := ctxT(t, 30*time.Second)
	other := newClient(t)
	w := mustWatch(t, c, "handoff")
	expect(t, nextEvent(t, w), client.EventReset, "", 0)
	l1 := mustAcquire(t, other, "handoff")
	expect(t, nextEvent(t, w), client.EventGranted, l1.Owner(), l1.Token())
	got := make(chan *client.Lease, 1)
	go func() {
		l, err := other.Acquire(ctx, "handoff", client.WithTTL(time.Minute))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	// The waiter queues on the server (its wait is a FENCE.ACQUIRE ... WAIT
	// in flight; a second is ample for it to arrive); then the release
	// hands it the lock, in the same command.
	time.Sleep(time.Second)
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		t.FailNow()
	}
	rel := nextEvent(t, w)
	expect(t, rel, client.EventReleased, l1.Owner(), l1.Token())
	g := nextEvent(t, w)
	expect(t, g, client.EventGranted, l2.Owner(), l2.Token())
	if g.Position != rel.Position {
		t.Fatalf("hand-off at %d, release at %d: want one command", g.Position, rel.Position)
	}
	d.mu.Lock()
	dials := d.dials
	d.mu.Unlock()
	if dials < 2 {
		t.Fatalf("the connection was not cut (%d dials)", dials)
	}
	select {
	case ev := <-w.Events():
		t.Fatalf("extra event %+v", ev)
	case <-time.After(300 * time.Millisecond):
	}
}

// A watch resumed from a position the node no longer retains starts with a
// reset: the current state, and the position it was read at.
func TestWatchResetBeyondTheWindow(t *testing.T) {
	stop, addr, err := startNode(func(c *server.Config) { c.WatchWindow = 4 })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := clientOf(t, []string{addr})
	ctx := ctxT(t, 30*time.Second)
	var first uint64
	for i := 0; i < 4; i++ {
		l := mustAcquire(t, c, "window")
		if first == 0 {
			first = l.Token()
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	held := mustAcquire(t, c, "window")
	w := mustWatch(t, c, "window", client.WatchFrom(first))
	reset := nextEvent(t, w)
	expect(t, reset, client.EventReset, held.Owner(), held.Token())
	if reset.Position < held.Token() {
		t.Fatalf("reset at %d, before the grant at %d", reset.Position, held.Token())
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	expect(t, nextEvent(t, w), client.EventReleased, held.Owner(), held.Token())
}

// Example-style check of the event's printed form in the docs.
func TestEventKindsAreTheWireNames(t *testing.T) {
	for _, k := range []client.EventKind{client.EventGranted, client.EventReleased, client.EventExpired, client.EventRevoked, client.EventReset} {
		if string(k) != strings.ToLower(string(k)) || fmt.Sprint(k) == "" {
			t.Fatalf("kind %q", k)
		}
	}
}
