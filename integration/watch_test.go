package integration

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/internal/resp"
)

// Watches (docs/protocol.md, Watches) against real fencerd processes: the
// changes of a lock seen in position order across a leader's death, by a
// watcher on a follower and by a client whose node is killed, with nothing
// missed and nothing twice; a resume beyond the retained window and a
// watcher that reads too slowly each get a reset, never a silent gap.

// wStartCluster starts three nodes with extra flags, as clStartCluster does.
func wStartCluster(t *testing.T, flags ...string) *clCluster {
	t.Helper()
	c := &clCluster{nodes: newDaemons(t, 3)}
	for i, d := range c.nodes {
		d.args = append(d.args, flags...)
		if i > 0 {
			d.args = append(d.args, "--join", c.nodes[0].addr)
		}
	}
	for _, d := range c.nodes {
		d.start(t)
	}
	c.leader(t, clFormTimeout)
	return c
}

// wEvent is one fence.event.
type wEvent struct {
	kind, owner string
	pos, token  uint64
}

// rawWatcher is a RESP3 connection watching one key.
type rawWatcher struct {
	t    *testing.T
	conn net.Conn
	rd   *bufio.Reader
}

// watchRaw opens a RESP3 connection to addr, with dial if not nil, and
// sends FENCE.WATCH key (FROM from if from >= 0); it reads the replies up
// to the confirmation.
func watchRaw(t *testing.T, addr, key string, from int64, dial func(string) (net.Conn, error)) *rawWatcher {
	t.Helper()
	if dial == nil {
		dial = func(a string) (net.Conn, error) { return net.DialTimeout("tcp", a, 5*time.Second) }
	}
	conn, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	w := &rawWatcher{t: t, conn: conn, rd: bufio.NewReader(conn)}
	args := []string{"FENCE.WATCH", key}
	if from >= 0 {
		args = append(args, "FROM", strconv.FormatInt(from, 10))
	}
	if _, err := conn.Write(append(resp.Command("HELLO", "3"), resp.Command(args...)...)); err != nil {
		t.Fatal(err)
	}
	if v := w.read(10 * time.Second); v.Kind != resp.Map {
		t.Fatalf("HELLO 3: %v", v)
	}
	if v := w.read(10 * time.Second); v.Kind != resp.Push || len(v.Elems) != 3 || v.Elems[0].Str != "fence.watch" {
		t.Fatalf("FENCE.WATCH: %v", v)
	}
	return w
}

func (w *rawWatcher) read(within time.Duration) resp.Value {
	w.t.Helper()
	_ = w.conn.SetReadDeadline(time.Now().Add(within))
	v, err := resp.ReadValue(w.rd)
	if err != nil {
		w.t.Fatalf("reading a watch: %v", err)
	}
	return v
}

func (w *rawWatcher) next(within time.Duration) wEvent {
	w.t.Helper()
	v := w.read(within)
	if v.Kind != resp.Push || len(v.Elems) != 7 || v.Elems[0].Str != "fence.event" {
		w.t.Fatalf("not an event: %v", v)
	}
	return wEvent{kind: v.Elems[2].Str, owner: v.Elems[4].Str, pos: uint64(v.Elems[3].Int), token: uint64(v.Elems[5].Int)}
}

// grant is one grant the test made.
type wGrant struct {
	owner string
	token uint64
}

// checkHistory checks a watcher's events against the grants made, in
// order: each grant exactly once, tokens increasing, each followed by the
// end of that same grant before the next, positions never going back. A
// reset is allowed only where allowReset says, and must then agree with the
// grants. It returns the number of resets.
func checkHistory(t *testing.T, who string, evs []wEvent, grants []wGrant) int {
	t.Helper()
	var lastPos uint64
	held := wGrant{}
	next, resets := 0, 0
	for i, e := range evs {
		if e.pos < lastPos {
			t.Fatalf("%s: event %d %+v goes back from position %d", who, i, e, lastPos)
		}
		lastPos = e.pos
		switch e.kind {
		case "granted":
			if held.token != 0 {
				t.Fatalf("%s: event %d %+v while %+v still holds", who, i, e, held)
			}
			if next >= len(grants) || grants[next] != (wGrant{e.owner, e.token}) {
				t.Fatalf("%s: event %d %+v, want grant %d of %v", who, i, e, next, grants)
			}
			held = grants[next]
			next++
		case "released", "expired", "revoked":
			if held != (wGrant{e.owner, e.token}) {
				t.Fatalf("%s: event %d %+v ends a grant other than the holder %+v", who, i, e, held)
			}
			held = wGrant{}
		case "reset":
			resets++
			held = wGrant{e.owner, e.token}
			// The grants before the reset's state are skipped.
			for next < len(grants) && grants[next].token <= e.token && e.token != 0 {
				next++
			}
			for next < len(grants) && e.token == 0 && grants[next].token <= e.pos {
				next++
			}
		default:
			t.Fatalf("%s: event %d of unknown kind %+v", who, i, e)
		}
	}
	if next != len(grants) {
		t.Fatalf("%s: saw %d of the %d grants: %v", who, next, len(grants), evs)
	}
	return resets
}

// changer takes and releases a lock over and over through a client of
// every node, and records each grant.
type changer struct {
	mu     sync.Mutex
	grants []wGrant
	err    error
	stop   chan struct{}
	done   chan struct{}
}

func startChanger(t *testing.T, c *client.Client, name string) *changer {
	ch := &changer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(ch.done)
		for {
			select {
			case <-ch.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			l, err := c.Acquire(ctx, name, client.WithTTL(5*time.Second))
			if err == nil {
				ch.mu.Lock()
				ch.grants = append(ch.grants, wGrant{l.Owner(), l.Token()})
				ch.mu.Unlock()
				err = l.Release(ctx)
			}
			cancel()
			if err != nil {
				ch.mu.Lock()
				ch.err = err
				ch.mu.Unlock()
				return
			}
		}
	}()
	return ch
}

func (ch *changer) count() int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return len(ch.grants)
}

// awaitCount waits until the changer made n more grants.
func (ch *changer) awaitMore(t *testing.T, n int, within time.Duration) {
	t.Helper()
	want := ch.count() + n
	deadline := time.Now().Add(within)
	for ch.count() < want {
		ch.mu.Lock()
		err := ch.err
		ch.mu.Unlock()
		if err != nil {
			t.Fatalf("changer: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("changer made %d grants, want %d within %v", ch.count(), want, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (ch *changer) finish(t *testing.T) []wGrant {
	t.Helper()
	close(ch.stop)
	<-ch.done
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.err != nil {
		t.Fatalf("changer: %v", ch.err)
	}
	return ch.grants
}

// collectRaw reads a watcher's events until the grant with token last has
// been released (or a reset shows it released).
func collectRaw(t *testing.T, w *rawWatcher, last uint64, within time.Duration) []wEvent {
	t.Helper()
	var out []wEvent
	deadline := time.Now().Add(within)
	for {
		e := w.next(time.Until(deadline))
		out = append(out, e)
		if e.kind != "granted" && e.kind != "reset" && e.token == last || e.kind == "reset" && e.token == 0 && e.pos > last {
			return out
		}
	}
}

func collectClient(t *testing.T, w *client.Watch, last uint64, within time.Duration) []wEvent {
	t.Helper()
	var out []wEvent
	timeout := time.After(within)
	for {
		select {
		case e, ok := <-w.Events():
			if !ok {
				t.Fatalf("client watch ended: %v", w.Err())
			}
			out = append(out, wEvent{string(e.Kind), e.Owner, e.Position, e.Token})
			if e.Kind != client.EventGranted && e.Kind != client.EventReset && e.Token == last ||
				e.Kind == client.EventReset && e.Token == 0 && e.Position > last {
				return out // (a reset may cover the last release)
			}
		case <-timeout:
			t.Fatalf("client watch: the release of %d not seen within %v; got %v", last, within, out)
		}
	}
}

// The leader dies while a lock changes hands: a raw watcher on a follower
// and a client watch that was on the leader (it reconnects to another node
// and resumes from its last position) each see every grant the changer
// made, once, in order, with no reset.
func TestWatchAcrossLeaderDeath(t *testing.T) {
	cl := clStartCluster(t)
	old := cl.leader(t, clFormTimeout)
	follower := (old + 1) % 3
	other := (old + 2) % 3
	const key = "watched-lock"

	fw := watchRaw(t, cl.nodes[follower].addr, key, -1, nil)
	if e := fw.next(10 * time.Second); e.kind != "reset" || e.token != 0 {
		t.Fatalf("first event %+v, want a reset of a free lock", e)
	}
	// The client's first address is the leader's: its watch starts there.
	wc := clNew(t, cl.addrs(old, follower, other), client.WithRequestTimeout(2*time.Second))
	cw, err := wc.Watch(clCtx(t, 2*time.Minute), key)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	if e := <-cw.Events(); e.Kind != client.EventReset {
		t.Fatalf("first client event %+v, want a reset", e)
	}

	ch := startChanger(t, clNew(t, cl.addrs()), key)
	ch.awaitMore(t, 20, 30*time.Second)
	killed := time.Now()
	cl.nodes[old].kill9(t)
	now := cl.leader(t, clElectionTimeout)
	t.Logf("node %d killed; node %d leads after %v", old, now, time.Since(killed).Round(time.Millisecond))
	ch.awaitMore(t, 20, 30*time.Second)
	grants := ch.finish(t)
	last := grants[len(grants)-1].token
	t.Logf("%d grants, tokens %d..%d", len(grants), grants[0].token, last)

	if n := checkHistory(t, "follower's watcher", collectRaw(t, fw, last, 30*time.Second), grants); n != 0 {
		t.Fatalf("follower's watcher got %d resets", n)
	}
	if n := checkHistory(t, "client watch", collectClient(t, cw, last, 30*time.Second), grants); n != 0 {
		t.Fatalf("client watch got %d resets", n)
	}
}

// The node a client's watch is on is killed (a follower: no election);
// the watch resumes on another node within the window, with nothing
// missed and nothing twice.
func TestWatchReconnectWithinWindow(t *testing.T) {
	cl := clStartCluster(t)
	leader := cl.leader(t, clFormTimeout)
	victim := (leader + 1) % 3
	const key = "resumed-lock"
	wc := clNew(t, cl.addrs(victim, leader, (leader+2)%3), client.WithRequestTimeout(2*time.Second))
	cw, err := wc.Watch(clCtx(t, 2*time.Minute), key)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	<-cw.Events()
	ch := startChanger(t, clNew(t, cl.addrs(leader)), key)
	ch.awaitMore(t, 20, 30*time.Second)
	cl.nodes[victim].kill9(t)
	ch.awaitMore(t, 20, 30*time.Second)
	grants := ch.finish(t)
	evs := collectClient(t, cw, grants[len(grants)-1].token, 30*time.Second)
	if n := checkHistory(t, "client watch", evs, grants); n != 0 {
		t.Fatalf("client watch got %d resets", n)
	}
}

// Beyond the window: nodes that keep only 4 events. A watch resumed from a
// position they no longer have starts with a reset: raw, and through the
// client when its node stops answering while the lock changes many times.
func TestWatchResetBeyondWindow(t *testing.T) {
	cl := wStartCluster(t, "--watch-window", "4")
	leader := cl.leader(t, clFormTimeout)
	paused := (leader + 1) % 3
	const key = "windowed-lock"
	c := clNew(t, cl.addrs(leader))
	ctx := clCtx(t, time.Minute)
	change := func(n int) []wGrant {
		var out []wGrant
		for i := 0; i < n; i++ {
			l, err := c.TryAcquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, wGrant{l.Owner(), l.Token()})
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	first := change(1)[0]

	// Raw: resume from the first grant on another node, after 10 more.
	change(10)
	held, err := c.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// (First, until that node has applied the last grant: a watch without
	// FROM starts with the current state.)
	other := cl.nodes[(leader+2)%3].addr
	probe := watchRaw(t, other, key, -1, nil)
	for e := probe.next(10 * time.Second); e.token != held.Token(); e = probe.next(10 * time.Second) {
	}
	rw := watchRaw(t, other, key, int64(first.token), nil)
	e := rw.next(10 * time.Second)
	if e.kind != "reset" || e.owner != held.Owner() || e.token != held.Token() || e.pos < held.Token() {
		t.Fatalf("resumed beyond the window: %+v, want a reset with the holder %s/%d", e, held.Owner(), held.Token())
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if e := rw.next(10 * time.Second); e.kind != "released" || e.token != held.Token() {
		t.Fatalf("after the reset: %+v, want the release of %d", e, held.Token())
	}

	// Client: its node is paused; the lock changes 10 times; the watch
	// gives up on the node, and resumes on another that no longer has
	// those changes.
	wc := clNew(t, cl.addrs(paused, leader), client.WithRequestTimeout(time.Second))
	cw, err := wc.Watch(clCtx(t, time.Minute), key)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	e0 := <-cw.Events()
	if e0.Kind != client.EventReset {
		t.Fatalf("first event %+v", e0)
	}
	before := change(1)
	cl.nodes[paused].clStop(t)
	skipped := change(10)
	after := change(1)
	evs := append([]wEvent{{string(e0.Kind), e0.Owner, e0.Position, e0.Token}}, collectClient(t, cw, after[0].token, 30*time.Second)...)
	resets := checkHistory(t, "client watch", evs, append(append(before, skipped...), after...))
	if resets != 2 { // the first event, and the one after the pause
		t.Fatalf("client watch: %d resets, want 2: %v", resets, evs)
	}
}

// A watcher that does not read while thousands of changes happen is sent a
// reset once it reads again: the node dropped what piled up for it, never
// holding the applying back, and what it then sends agrees with the lock.
func TestWatchSlowWatcherGetsReset(t *testing.T) {
	d := startFencerd(t)
	const key = "busy-lock"
	// A small receive buffer, so that the node's writes back up soon.
	dial := func(a string) (net.Conn, error) {
		nd := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			})
			if err != nil {
				return err
			}
			return serr
		}}
		return nd.Dial("tcp", a)
	}
	w := watchRaw(t, d.addr, key, -1, dial)
	start := w.next(10 * time.Second)
	// The watcher reads slowly while the writers run (a millisecond an
	// event, slower than the node makes them), so that its events pile up
	// on the node, which drops them and sends a reset; it never stops
	// reading, which the node would take for a dead client (a write that
	// blocks for 10 s closes the connection), however long the writes take
	// on a loaded machine.
	type wRead struct {
		e   wEvent
		err error
	}
	events := make(chan wRead, 1<<17)
	var writing atomic.Bool
	writing.Store(true)
	go func() {
		for {
			_ = w.conn.SetReadDeadline(time.Now().Add(time.Minute))
			v, err := resp.ReadValue(w.rd)
			if err != nil {
				events <- wRead{err: err}
				return
			}
			if v.Kind != resp.Push || len(v.Elems) != 7 || v.Elems[0].Str != "fence.event" {
				events <- wRead{err: fmt.Errorf("not an event: %v", v)}
				return
			}
			events <- wRead{e: wEvent{kind: v.Elems[2].Str, owner: v.Elems[4].Str, pos: uint64(v.Elems[3].Int), token: uint64(v.Elems[5].Int)}}
			if writing.Load() {
				time.Sleep(time.Millisecond)
			}
		}
	}()

	// 32 connections set the key to new values of 1 KiB, 700 each: every
	// SET of a new value is a grant. That is about 22 MB of events, far
	// more than the node queues for one watch and the sockets hold.
	const conns, each = 32, 700
	pad := strings.Repeat("x", 1000)
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		rc := dialRESP(t, d)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				_ = rc.c.SetDeadline(time.Now().Add(requestTimeout))
				if _, err := rc.c.Write(resp.Command("SET", key, fmt.Sprint(i, "-", j, pad))); err != nil {
					errs <- err
					return
				}
				if v, err := resp.ReadPlain(rc.r); err != nil || v != "OK" {
					errs <- fmt.Errorf("SET: %#v, %v", v, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	writing.Store(false)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := conns * each
	rc := dialRESP(t, d)
	finalOwner, ok := rc.do(t, "GET", key).(string)
	if !ok {
		t.Fatal("GET: no value")
	}
	finalToken, ok := rc.do(t, "FENCE.TOKEN", key).(int64)
	if !ok {
		t.Fatal("FENCE.TOKEN: no token")
	}

	// Now read everything: a reset must come, and the events after it
	// must lead to the final state with positions going on from it.
	var got, resets int
	var lastPos uint64 = start.pos
	var holder wEvent
	for holder.token != uint64(finalToken) || holder.owner != finalOwner {
		var e wEvent
		select {
		case r := <-events:
			if r.err != nil {
				t.Fatalf("reading a watch: %v", r.err)
			}
			e = r.e
		case <-time.After(30 * time.Second):
			t.Fatalf("no event for 30 s; the holder is %+v, want %s with token %d", holder, finalOwner[:8], finalToken)
		}
		got++
		if e.pos < lastPos {
			t.Fatalf("event %+v goes back from %d", e, lastPos)
		}
		lastPos = e.pos
		switch e.kind {
		case "reset":
			resets++
			holder = e
		case "granted":
			holder = e
		default:
			t.Fatalf("unexpected %s", e.kind)
		}
	}
	if resets == 0 || got >= total {
		t.Fatalf("%d events for %d changes with %d resets: want some dropped and a reset", got, total, resets)
	}
	t.Logf("%d changes, %d events delivered, %d resets", total, got, resets)
}

// A client watch that moves to a follower behind it, while that follower
// installs a snapshot: the follower is paused (SIGSTOP) while the leader's
// log moves past whole segments of a small --raft-segment-size and is
// compacted behind its snapshots; the watch, on the leader, sees the lock
// change; the leader is killed and the follower continued, so the watch
// resumes (FROM its last position less one) on a node that is behind it and
// is then sent a snapshot by the new leader. The client delivers every grant
// once, in order, positions never going back (a reset, if the snapshot is
// past the watch's position, must agree with the grants).
func TestWatchClientAcrossFollowerSnapshotInstall(t *testing.T) {
	cl := wStartCluster(t, "--raft-segment-size", "65536", "--raft-trailing-logs", "2",
		"--snapshot-threshold", "32", "--snapshot-interval", "200ms", "--raft-log-level", "info")
	leader := cl.leader(t, clFormTimeout)
	lagging := (leader + 1) % 3
	other := (leader + 2) % 3
	const key = "snapshot-watched"
	ctx := clCtx(t, 2*time.Minute)

	wc := clNew(t, cl.addrs(leader, lagging), client.WithRequestTimeout(2*time.Second))
	cw, err := wc.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	e0 := <-cw.Events()
	if e0.Kind != client.EventReset {
		t.Fatalf("first event %+v, want a reset", e0)
	}
	evs := []wEvent{{string(e0.Kind), e0.Owner, e0.Position, e0.Token}}

	cl.nodes[lagging].clStop(t)
	c := clNew(t, cl.addrs(leader, other))
	rdb := newClient(t, cl.nodes[leader])
	value := strings.Repeat("v", 4000)
	var grants []wGrant
	change := func() {
		l, err := c.TryAcquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		grants = append(grants, wGrant{l.Owner(), l.Token()})
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 300; i++ {
		if err := rdb.Set(ctx, fmt.Sprint("fill:", i%50), value, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if i%30 == 0 {
			change()
		}
	}
	// The last changes come after the last snapshot (fewer entries than
	// --snapshot-threshold), so the snapshot the follower will be sent is
	// below the watch's last position.
	time.Sleep(time.Second)
	change()
	change()
	last := grants[len(grants)-1].token
	evs = append(evs, collectClient(t, cw, last, 30*time.Second)...)

	cl.nodes[leader].kill9(t)
	if err := cl.nodes[lagging].proc.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c2 := clNew(t, cl.addrs(other, lagging))
	l, err := c2.Acquire(ctx, key, client.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	grants = append(grants, wGrant{l.Owner(), l.Token()})
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, collectClient(t, cw, l.Token(), time.Minute)...)
	resets := checkHistory(t, "client watch", evs, grants)
	installed := strings.Contains(cl.nodes[lagging].log(t), "Installed remote snapshot")
	t.Logf("%d grants, %d events, %d resets; the lagging follower installed a snapshot: %v", len(grants), len(evs), resets, installed)
	if !installed {
		t.Fatal("the lagging follower caught up without a snapshot: the test did not test what it is for")
	}
	for i := 1; i < len(evs); i++ {
		if evs[i] == evs[i-1] {
			t.Fatalf("event %d delivered twice: %+v", i, evs[i])
		}
	}
}
