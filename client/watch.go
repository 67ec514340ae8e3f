package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// EventKind is the kind of a watch event.
type EventKind string

// The kinds of event (docs/protocol.md, Watches).
const (
	// EventGranted: the lock is held by a new grant (Owner, Token).
	// Renewals are not events.
	EventGranted EventKind = "granted"
	// EventReleased: the holder (Owner, Token) released the lock.
	EventReleased EventKind = "released"
	// EventExpired: the lease (Owner, Token) ran out.
	EventExpired EventKind = "expired"
	// EventRevoked: the lease (Owner, Token) was revoked.
	EventRevoked EventKind = "revoked"
	// EventReset: changes before Position were skipped; Owner and Token
	// are the holder as of Position (Token 0: free). It is the first event
	// of a watch started without WatchFrom, and comes after a resume the
	// node no longer has the history for, or when the caller read too
	// slowly. In a watch of a prefix (WatchPrefix) a reset names no lock
	// (Name, Owner and Token empty): the state of the locks under the
	// prefix as of Position is what a listing (Locks) read at or after it
	// shows.
	EventReset EventKind = "reset"
	// EventProclaimed: the holder (Owner, Token) of a lock under a
	// session, an election's leader, announced a new Value.
	EventProclaimed EventKind = "proclaimed"
)

// Event is one change of a watched lock.
type Event struct {
	Kind EventKind
	Name string
	// Position is the position of the command that made the change in the
	// cluster's log (for a reset, the position the state was read at):
	// events are delivered in position order, and several events of one
	// command (a release and the hand-off to a waiter) share it.
	Position uint64
	Owner    string
	Token    uint64
	// Value is the lock's value under a session (an election's leader's
	// value) in a granted, proclaimed or reset event.
	Value string
}

// WatchOption configures a Watch.
type WatchOption func(*watchConfig)

type watchConfig struct {
	from   uint64
	resume bool
}

// WatchFrom starts the watch after position pos (an Event's Position seen
// earlier): every change after it is delivered, or, if the node no longer
// retains them all, a reset first. The default is to start with a reset
// holding the current state.
func WatchFrom(pos uint64) WatchOption {
	return func(c *watchConfig) { c.from, c.resume = pos, true }
}

// Watch is a stream of the changes of one lock, pushed by the server: no
// polling. It survives the loss of its node: it reconnects to another of
// the client's addresses and resumes after the last event it delivered,
// so nothing is delivered twice and nothing is skipped without an
// EventReset saying so.
type Watch struct {
	c      *Client
	name   string // the lock, or the prefix
	prefix bool
	events chan Event
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	err    error       // why it ended; set before done is closed
	closed atomic.Bool // Close was called

	// The resume point, used by run only: the last position delivered, and
	// how many events at it were delivered (a reset covers them all).
	cfg       watchConfig
	delivered bool
	last      uint64
	atLast    int
	lastReset bool
}

// watchBuffer is how many events the client reads ahead of the caller.
const watchBuffer = 16

// Watch starts watching the lock name on any of the client's nodes (a
// follower serves it from its own log, as well as the leader). It returns
// once a node accepted the watch. The events come on Events, in position
// order, until ctx ends, Close is called, or the watch fails: no node
// could be reached for the failover timeout (ErrNoLeader), or a node
// refused it (ErrAuth, ErrNoPerm, ErrInvalidArgument, ErrTLS); Err then
// says why. A caller that does not keep up with the events is sent an
// EventReset rather than hold the server back.
func (c *Client) Watch(ctx context.Context, name string, opts ...WatchOption) (*Watch, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty lock name", ErrInvalidArgument)
	}
	return c.startWatch(ctx, &Watch{c: c, name: name}, opts)
}

// WatchPrefix is Watch for every lock whose name starts with prefix (""
// is every lock the user may see): their events, each with its Name, in
// position order, with the same resumption across nodes. Its resets name
// no lock (EventReset).
func (c *Client) WatchPrefix(ctx context.Context, prefix string, opts ...WatchOption) (*Watch, error) {
	return c.startWatch(ctx, &Watch{c: c, name: prefix, prefix: true}, opts)
}

func (c *Client) startWatch(ctx context.Context, w *Watch, opts []WatchOption) (*Watch, error) {
	w.events, w.done = make(chan Event, watchBuffer), make(chan struct{})
	for _, o := range opts {
		o(&w.cfg)
	}
	w.ctx, w.cancel = context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, w.cancel)
	started := make(chan struct{})
	go func() {
		defer stop()
		w.run(started)
	}()
	select {
	case <-started:
		return w, nil
	case <-w.done:
		return nil, w.err
	}
}

// Events returns the channel the events come on. It is closed when the
// watch ends.
func (w *Watch) Events() <-chan Event { return w.events }

// Done is closed when the watch has ended.
func (w *Watch) Done() <-chan struct{} { return w.done }

// Err returns why the watch ended: nil while it runs or after Close, the
// context's error if ctx ended, ErrClosed if the Client was closed, or the
// failure.
func (w *Watch) Err() error {
	select {
	case <-w.done:
		return w.err
	default:
		return nil
	}
}

// Close ends the watch and waits for it to stop.
func (w *Watch) Close() error {
	w.closed.Store(true)
	w.cancel()
	<-w.done
	return nil
}

// errWatchStopped marks a session ended by the watch's own context.
var errWatchStopped = errors.New("client: watch stopped")

// run keeps a session with one node after another until the watch ends.
func (w *Watch) run(started chan struct{}) {
	defer close(w.done)
	defer close(w.events)
	c := w.c
	c.mu.Lock()
	idx := c.cur
	c.mu.Unlock()
	backoff := minBackoff
	failingSince := time.Now()
	var last error
	for tries := 1; ; tries++ {
		n := c.nodes[idx%len(c.nodes)]
		ok, err := w.session(n, started)
		if ok {
			started = nil
			failingSince, backoff, tries = time.Now(), minBackoff, 0
		}
		switch {
		case w.ctx.Err() != nil:
			switch {
			case c.ctx.Err() != nil:
				w.err = context.Cause(c.ctx)
			case w.closed.Load():
				w.err = nil
			default:
				w.err = w.ctx.Err()
			}
			return
		case err != nil:
			if f := classify(err); !f.transient {
				w.err = refusedBy(n, f.err)
				return
			}
			last = fmt.Errorf("%s: %w", n.addr, err)
		}
		if time.Since(failingSince) >= c.cfg.failoverTimeout {
			w.err = unavailable(last)
			return
		}
		idx++
		if tries%len(c.nodes) == 0 {
			if sleep(w.ctx, c.ctx, jitter(backoff)) != nil {
				continue // reported at the top
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// replyError is an error reply read on a watch connection; it implements
// go-redis's redis.Error, so that classify reads its code as for any other
// request.
type replyError string

func (e replyError) Error() string { return string(e) }
func (e replyError) RedisError()   {}

// session watches on n until the connection fails or the watch ends. ok
// reports that n accepted the watch. started, if not nil, is closed then.
func (w *Watch) session(n *node, started chan struct{}) (ok bool, err error) {
	c := w.c
	dial := n.opts.Dialer
	if dial == nil {
		d := &net.Dialer{Timeout: c.cfg.requestTimeout, KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	dctx, cancel := context.WithTimeout(w.ctx, c.cfg.requestTimeout)
	conn, err := dial(dctx, "tcp", n.addr)
	cancel()
	if err != nil {
		return false, err
	}
	// The connection closes when the watch ends, which ends any read.
	closed := make(chan struct{})
	stop := context.AfterFunc(w.ctx, func() { _ = conn.Close() })
	defer func() {
		stop()
		close(closed)
		_ = conn.Close()
	}()

	hello := [][]byte{[]byte("HELLO"), []byte("3")}
	if c.cfg.password != "" {
		user := c.cfg.user
		if user == "" {
			user = "default"
		}
		hello = append(hello, []byte("AUTH"), []byte(user), []byte(c.cfg.password))
	}
	cmd := resp.AppendCommand(nil, hello...)
	args := [][]byte{[]byte("FENCE.WATCH"), []byte(w.name)}
	confirm, event, fields := "fence.watch", "fence.event", 7
	if w.prefix {
		args = [][]byte{[]byte("FENCE.WATCH"), []byte("PREFIX"), []byte(w.name)}
		confirm, event, fields = "fence.pwatch", "fence.pevent", 8
	}
	if from, resume := w.resumeFrom(); resume {
		args = append(args, []byte("FROM"), strconv.AppendUint(nil, from, 10))
	}
	cmd = resp.AppendCommand(cmd, args...)
	_ = conn.SetDeadline(time.Now().Add(c.cfg.requestTimeout))
	if _, err := conn.Write(cmd); err != nil {
		return false, err
	}
	rd := bufio.NewReader(conn)
	for i := 0; i < 2; i++ {
		v, err := resp.ReadValue(rd)
		switch {
		case err != nil:
			return false, err
		case v.Kind == resp.Error:
			return false, replyError(v.Str)
		case i == 1 && (v.Kind != resp.Push || len(v.Elems) != 3 || v.Elems[0].Str != confirm):
			return false, fmt.Errorf("client: unexpected reply to FENCE.WATCH: %v", v)
		}
	}
	_ = conn.SetDeadline(time.Time{})
	if started != nil {
		close(started)
	}

	// A node that stops answering (paused, cut off) is found by pinging
	// it: PING is served between the pushes.
	every := max(c.cfg.requestTimeout/2, 100*time.Millisecond)
	var wmu sync.Mutex
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		ping := resp.AppendCommand(nil, []byte("PING"))
		for {
			select {
			case <-closed:
				return
			case <-t.C:
				wmu.Lock()
				_ = conn.SetWriteDeadline(time.Now().Add(c.cfg.requestTimeout))
				_, err := conn.Write(ping)
				wmu.Unlock()
				if err != nil {
					return
				}
			}
		}
	}()
	skip := w.skipAtLast()
	for {
		_ = conn.SetReadDeadline(time.Now().Add(every + c.cfg.requestTimeout))
		v, err := resp.ReadValue(rd)
		switch {
		case err != nil:
			return true, err
		case v.Kind == resp.Error:
			return true, replyError(v.Str)
		case v.Kind != resp.Push || len(v.Elems) != fields || v.Elems[0].Str != event:
			continue // PONG
		}
		f := v.Elems[fields-6:] // key kind position owner token value
		ev := Event{Kind: EventKind(f[1].Str), Name: f[0].Str,
			Position: uint64(f[2].Int), Owner: f[3].Str, Token: uint64(f[4].Int), Value: f[5].Str}
		if ev.Kind == EventReset && w.delivered && ev.Position < w.last {
			// A state older than what was delivered (a node behind the
			// last position, from a server that dates a reset below a
			// FROM): it covers no event that was not delivered, and the
			// events after it come next.
			continue
		}
		if ev.Kind != EventReset && w.delivered && ev.Position <= w.last {
			// Resumed from just before the last position: the events at
			// it that were delivered come again first; anything a reset
			// or an earlier position covered is not delivered again.
			if ev.Position < w.last || w.lastReset {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			w.atLast++
			if !w.deliver(ev) {
				return true, errWatchStopped
			}
			continue
		}
		if ev.Kind == EventReset {
			w.lastReset, w.atLast = true, 0
		} else {
			w.lastReset, w.atLast = false, 1
		}
		w.delivered, w.last, skip = true, ev.Position, 0
		if !w.deliver(ev) {
			return true, errWatchStopped
		}
	}
}

// resumeFrom returns the FROM of the next FENCE.WATCH: just before the last
// position delivered, unless a reset, which covers every event at its
// position, was the last.
func (w *Watch) resumeFrom() (uint64, bool) {
	switch {
	case !w.delivered:
		return w.cfg.from, w.cfg.resume
	case w.lastReset || w.last == 0:
		return w.last, true
	}
	return w.last - 1, true
}

// skipAtLast is how many events at the last position a resumed session
// must not deliver again.
func (w *Watch) skipAtLast() int {
	if !w.delivered || w.lastReset {
		return 0
	}
	return w.atLast
}

func (w *Watch) deliver(ev Event) bool {
	select {
	case w.events <- ev:
		return true
	case <-w.ctx.Done():
		return false
	}
}
