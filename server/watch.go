package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fencerlock/fencer/fsm"
)

// Watches: a client names a key and is told every change of who holds it,
// as the applied log makes it, with no polling.
//
// Every node derives the same events from the entries it applies (the
// applier hands each command's result to watchHub.appliedLocked), so any
// node, leader or follower, serves watches from its own applied state and
// nothing is forwarded. An event carries the position of the command that
// made it (fsm.Result.Position), the same on every node and totally
// ordered; the events of one command (a transaction's, or a release and
// the hand-off to a waiter) share it and come in the order they happened.
//
// A node keeps the last Config.WatchWindow events (and no more than
// watchBytes of them) in a ring, so that a client that lost its connection
// resumes from the last position it saw, on any node, and misses nothing.
// When the history it asks for is gone (older than the ring, or from before
// a snapshot the node restored, at start or sent by the leader), or when it
// reads too slowly and its queue fills up, it is sent a reset instead: the
// key's current state and the position it was read at, after which events
// resume from that position. A watcher is never left with a silent gap, and
// applying entries never waits for one.
//
// A watch of a prefix (Node.WatchPrefix) is the same with every key that
// starts with it: the events of all of them, in position order, from the
// same ring and with the same positions. Its reset names no key: it says
// that the events up to its position were not delivered, and the state of
// the keys under the prefix is what a listing read at or after that
// position shows (reading it here would hold applying for as long as the
// keys take to scan). Every event applied is matched against each prefix
// watch, so the node bounds them (Config.MaxPrefixWatches); with none,
// applying pays one length check.

// EventKind is the kind of a watch event.
type EventKind uint8

// The kinds of event. A new kind (an election's change of value, say) is
// added here, to eventKindNames, and where eventsOf derives it.
const (
	// EventGranted: the key is held by a new grant (Owner, Token): an
	// acquire of a free key, a hand-off to a waiter, or a Redis write that
	// issued a new token. A renewal or extension is not an event.
	EventGranted EventKind = iota + 1
	// EventReleased: the holder (Owner, Token) released the key, or a
	// write of a value of another kind replaced it.
	EventReleased
	// EventExpired: the lease (Owner, Token) ran out.
	EventExpired
	// EventRevoked: the lease (Owner, Token) was revoked (FENCE.REVOKE, or
	// a Redis DEL).
	EventRevoked
	// EventReset: the events before Position were not delivered (never
	// asked for, no longer retained, or dropped because the watcher fell
	// behind). Owner and Token are the holder at Position; Token 0: free.
	// A prefix watch's reset has no Key, Owner or Token: the state of the
	// keys under the prefix at Position is a listing's (FENCE.LOCKS).
	EventReset
	// EventProclaimed: the holder (Owner, Token) of a lock under a session
	// (an election's leader) set its value (Value); the token is unchanged.
	EventProclaimed
)

var eventKindNames = [...]string{EventGranted: "granted", EventReleased: "released",
	EventExpired: "expired", EventRevoked: "revoked", EventReset: "reset", EventProclaimed: "proclaimed"}

// String names the kind as the wire and the docs do.
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// WatchEvent is one change of a watched key.
type WatchEvent struct {
	Kind EventKind
	Key  string
	// Position is the position of the command that made the change (or,
	// for a reset, that the state was read at): the Raft index of its
	// entry, plus the offsets that batches of commands and restores from
	// another cluster add (fsm.Result.Position).
	Position uint64
	// Owner and Token name the grant: the new one for EventGranted, the one
	// that ended for a release, expiry or revoke, the current one (Token 0
	// when free) for a reset.
	Owner string
	Token uint64
	// Value is the lock's value (an election's leader's value) for a grant,
	// a proclaim or a reset; empty for a lock without one.
	Value string
}

// watchQueue is how many events a watch holds for a reader that has not
// taken them yet; a watch whose queue is full drops it and is sent a reset.
const watchQueue = 1024

// watchHub keeps a node's retained events and its watches. Its mu guards
// everything in it; a watch's own mu (taken after the hub's) guards the
// watch's queue.
type watchHub struct {
	table *fsm.Table
	max   int // most watches at once (Config.MaxWatches)
	maxP  int // most prefix watches at once (Config.MaxPrefixWatches)
	queue int // each watch's queue (watchQueue; tests lower it)

	mu sync.Mutex
	// ring holds the last n events, the newest at head-1; bytes is what
	// their keys and owners take.
	ring  []WatchEvent
	head  int
	n     int
	bytes int
	// budget bounds bytes (watchBytes; tests lower it).
	budget int
	// since: every event with a position above it is in ring.
	since   uint64
	watches map[string]map[*Watch]struct{}
	// prefixes are the prefix watches (a slice: each event walks it);
	// count counts them too.
	prefixes []*Watch
	count    int
	closed   bool
	// grantsAt are the grants already emitted at position grantsPos, so a
	// transaction that writes a key twice with one token reports it once.
	grantsAt  map[string]WatchEvent
	grantsPos uint64
	// behind are the watches whose reset waits for the node to reach
	// their after (resetOf); behindN is their count, read without mu.
	behind  map[*Watch]struct{}
	behindN atomic.Int32
}

func newWatchHub(table *fsm.Table, window, max, maxPrefix int) *watchHub {
	return &watchHub{table: table, max: max, maxP: maxPrefix, queue: watchQueue, budget: watchBytes,
		ring: make([]WatchEvent, window), watches: make(map[string]map[*Watch]struct{}),
		grantsAt: make(map[string]WatchEvent),
		behind:   make(map[*Watch]struct{})}
}

// appliedLocked records the events of one command's result (the applier
// calls it for every command, with the grants' lock held) and hands them to
// the key's watches. It never blocks.
func (h *watchHub) appliedLocked(r *fsm.Result) {
	if r.Cmd == nil || r.Cmd.Op == fsm.OpMember {
		return
	}
	eventsOf(r, h.publish)
}

// eventsOf derives the events of a single command's result, in order.
func eventsOf(r *fsm.Result, emit func(WatchEvent)) {
	key := r.Cmd.Key
	// Keys without tokens (sorted sets, lists, sets) are never held, so
	// neither their creation nor their end is a change of holder.
	if f := r.Freed; f != nil && f.Token != 0 {
		kind := EventExpired // an acquire or extend that ended a lease the leader saw run out
		switch r.Code {
		case fsm.Released:
			kind = EventReleased
		case fsm.Revoked:
			kind = EventRevoked
		case fsm.Written:
			kind = EventReleased // replaced by a value of another kind
		}
		if f.Shared != nil {
			// A whole shared key: each of its holders ended.
			for _, h := range f.Shared.Holders {
				emit(WatchEvent{Kind: kind, Key: key, Position: r.Position, Owner: h.Owner, Token: h.Token})
			}
		} else {
			emit(WatchEvent{Kind: kind, Key: key, Position: r.Position, Owner: f.Owner, Token: f.Token})
		}
	}
	l := r.Lease
	if r.Holder != nil {
		l = r.Holder.Lease // a shared key's grant is its holder's
	}
	if l.Token != 0 && newGrant(r) {
		emit(WatchEvent{Kind: EventGranted, Key: key, Position: r.Position, Owner: l.Owner, Token: l.Token, Value: sessionValue(l)})
	}
	if r.Code == fsm.Proclaimed {
		l := r.Lease
		emit(WatchEvent{Kind: EventProclaimed, Key: key, Position: r.Position, Owner: l.Owner, Token: l.Token, Value: l.Data})
	}
}

// sessionValue is the value of a lock held under a session: its Data
// (other keys' Data is a Redis value of another kind, not reported).
func sessionValue(l fsm.Lease) string {
	if l.Session == 0 {
		return ""
	}
	return l.Data
}

// newGrant reports whether r left its key held by a grant it made.
func newGrant(r *fsm.Result) bool {
	switch {
	case r.Code == fsm.Granted, r.Waiter == fsm.WaiterGranted:
		return true
	case r.Code == fsm.Written:
		// A put issues its own position as the token when it makes a new
		// one (fsm.Table.put); otherwise the key kept its token.
		return r.Lease.Token == r.Position
	}
	return false
}

func (h *watchHub) publish(ev WatchEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.Kind == EventGranted {
		if ev.Position != h.grantsPos {
			clear(h.grantsAt)
			h.grantsPos = ev.Position
		}
		if h.grantsAt[ev.Key] == ev {
			return
		}
		h.grantsAt[ev.Key] = ev
	}
	size := eventSize(ev)
	for h.n > 0 && (h.n == len(h.ring) || h.bytes+size > h.budget) {
		h.evict()
	}
	if size <= h.budget {
		h.ring[h.head] = ev
		h.head = (h.head + 1) % len(h.ring)
		h.n++
		h.bytes += size
	} else {
		h.since = ev.Position // (a value too large to keep)
	}
	for w := range h.watches[ev.Key] {
		w.push(ev, h.queue)
	}
	if len(h.prefixes) > 0 {
		for _, w := range h.prefixes {
			if strings.HasPrefix(ev.Key, w.key) {
				w.push(ev, h.queue)
			}
		}
	}
}

// restoredLocked forgets the history: the table was replaced by a
// snapshot, and the changes it skipped were never seen here. A watch that
// has been given every event up to the snapshot's position or beyond (one
// resumed FROM a position this node had not reached) misses nothing: the
// entries after the snapshot make the events it has not had, and those it
// had are not sent again. Every other watch is sent a reset, dated at or
// after the snapshot's position.
func (h *watchHub) restoredLocked() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.ring)
	h.head, h.n, h.bytes = 0, 0, 0
	h.since = h.table.Position()
	clear(h.grantsAt)
	for _, ws := range h.watches {
		for w := range ws {
			w.restored(h.since)
		}
	}
	for _, w := range h.prefixes {
		w.restored(h.since)
	}
}

// advancedLocked wakes the watches whose reset waits for this node to
// reach the position they were given events up to (the applier calls it
// after each entry, with the grants' lock held).
func (h *watchHub) advancedLocked() {
	if h.behindN.Load() == 0 {
		return
	}
	pos := h.table.Position()
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.behind {
		if w.after <= pos {
			delete(h.behind, w)
			h.behindN.Add(-1)
			w.mu.Lock()
			w.signal()
			w.mu.Unlock()
		}
	}
}

// close ends every watch (the node is closing).
func (h *watchHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, ws := range h.watches {
		for w := range ws {
			w.end()
		}
	}
	for _, w := range h.prefixes {
		w.end()
	}
	h.watches = map[string]map[*Watch]struct{}{}
	h.prefixes = nil
	h.count = 0
}

// Watch is one watch of one key, or of every key under a prefix, on this
// node (Node.Watch, Node.WatchPrefix). Its events come from Next, in
// position order; Close ends it.
type Watch struct {
	hub    *watchHub
	key    string // the key, or the prefix
	prefix bool

	mu    sync.Mutex
	queue []WatchEvent
	after uint64 // only events with a position above it are delivered
	last  uint64 // the position of the last event queued
	reset bool   // the next event is a reset: the queue was dropped
	done  bool
	ready chan struct{} // signalled when the queue or the state changes
}

// Watch starts a watch of key on this node, served from its own applied
// state: no leader is involved. With resume, the watch delivers every
// event with a position above from (those this node still retains, then
// the new ones as it applies them; a node that has not applied from yet
// delivers them once it does); if the node no longer has them all, it
// first delivers a reset. Without resume, the first event is a reset with
// the key's current state.
//
// Errors: an ArgumentError for a bad key, ErrLimit past Config.MaxWatches,
// ErrShutdown when the node is closing.
func (n *Node) Watch(key string, from uint64, resume bool) (*Watch, error) {
	if err := n.checkWatchKey(key); err != nil {
		return nil, err
	}
	return n.watches.watch(key, from, resume)
}

func (n *Node) checkWatchKey(key string) error {
	switch {
	case key == "":
		return &ArgumentError{Arg: "key", Reason: "empty"}
	case len(key) > n.cfg.MaxKeyLen:
		return &ArgumentError{Arg: "key", Reason: fmt.Sprintf("%d bytes, over the limit of %d", len(key), n.cfg.MaxKeyLen)}
	}
	return nil
}

// WatchPrefix starts a watch of every key that starts with prefix ("":
// every key) on this node, as Watch does for one key: the events of all of
// them, in position order, with the same positions, resuming and resets.
// Its resets name no key (EventReset): the state of the keys under the
// prefix as of a reset's position is what a listing read at or after it
// shows (Node.Locks).
//
// Errors: an ArgumentError for a prefix longer than a key may be, ErrLimit
// past Config.MaxWatches or Config.MaxPrefixWatches, ErrShutdown when the
// node is closing.
func (n *Node) WatchPrefix(prefix string, from uint64, resume bool) (*Watch, error) {
	if len(prefix) > n.cfg.MaxKeyLen {
		return nil, &ArgumentError{Arg: "prefix", Reason: fmt.Sprintf("%d bytes, over the limit of %d", len(prefix), n.cfg.MaxKeyLen)}
	}
	return n.watches.watchPrefix(prefix, from, resume)
}

func (h *watchHub) watch(key string, from uint64, resume bool) (*Watch, error) {
	return h.add(&Watch{hub: h, key: key, after: from, ready: make(chan struct{}, 1)}, resume)
}

func (h *watchHub) watchPrefix(prefix string, from uint64, resume bool) (*Watch, error) {
	return h.add(&Watch{hub: h, key: prefix, prefix: true, after: from, ready: make(chan struct{}, 1)}, resume)
}

func (h *watchHub) add(w *Watch, resume bool) (*Watch, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return nil, ErrShutdown
	case h.count >= h.max:
		return nil, fmt.Errorf("%w: the node serves its maximum of %d watches", ErrLimit, h.max)
	case w.prefix && len(h.prefixes) >= h.maxP:
		return nil, fmt.Errorf("%w: the node serves its maximum of %d prefix watches", ErrLimit, h.maxP)
	}
	if resume && w.after >= h.since {
		h.replay(w)
	} else {
		w.reset = true
	}
	if w.prefix {
		h.prefixes = append(h.prefixes, w)
	} else {
		if h.watches[w.key] == nil {
			h.watches[w.key] = make(map[*Watch]struct{})
		}
		h.watches[w.key][w] = struct{}{}
	}
	h.count++
	return w, nil
}

// replay queues the retained events of w's keys after w.after.
func (h *watchHub) replay(w *Watch) {
	start := h.head - h.n + len(h.ring)
	for i := 0; i < h.n; i++ {
		ev := h.ring[(start+i)%len(h.ring)]
		if w.matches(ev.Key) {
			w.push(ev, h.queue)
		}
	}
}

// matches reports whether key is w's key, or under w's prefix.
func (w *Watch) matches(key string) bool {
	if w.prefix {
		return strings.HasPrefix(key, w.key)
	}
	return key == w.key
}

// evict drops the oldest retained event: the history before it is gone.
func (h *watchHub) evict() {
	i := (h.head - h.n + len(h.ring)) % len(h.ring)
	h.since = h.ring[i].Position
	h.bytes -= eventSize(h.ring[i])
	h.ring[i] = WatchEvent{}
	h.n--
}

// eventSize is what a retained event takes, roughly: its strings are the
// table's (a Redis value's can be large), kept alive by the ring.
func eventSize(ev WatchEvent) int { return len(ev.Key) + len(ev.Owner) + len(ev.Value) + 64 }

// remove forgets w.
func (h *watchHub) remove(w *Watch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.behind[w]; ok {
		delete(h.behind, w)
		h.behindN.Add(-1)
	}
	if w.prefix {
		if i := slices.Index(h.prefixes, w); i >= 0 {
			h.prefixes = slices.Delete(h.prefixes, i, i+1)
			h.count--
		}
		return
	}
	if ws := h.watches[w.key]; ws != nil {
		if _, ok := ws[w]; ok {
			delete(ws, w)
			h.count--
			if len(ws) == 0 {
				delete(h.watches, w.key)
			}
		}
	}
}

// Key returns the watched key, or the prefix of a prefix watch.
func (w *Watch) Key() string { return w.key }

// Prefix reports whether w watches every key under the prefix Key.
func (w *Watch) Prefix() bool { return w.prefix }

// push queues ev (hub's mu held). A full queue is dropped: the reader gets
// a reset instead, so applying never waits for it.
func (w *Watch) push(ev WatchEvent, max int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || w.reset || ev.Position <= w.after {
		return
	}
	if len(w.queue) >= max {
		w.queue, w.reset = nil, true
	} else {
		w.queue = append(w.queue, ev)
		w.last = ev.Position
	}
	w.signal()
}

// restored follows a restore of the table at position pos (hub's mu held):
// a watch given events up to pos or beyond goes on from there, any other
// is sent a reset.
func (w *Watch) restored(pos uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if top := max(w.after, w.last); !w.reset && top >= pos {
		w.after = top
		return
	}
	w.queue, w.reset = nil, true
	w.signal()
}

// overflow drops the queue for a reset (hub's mu held).
func (w *Watch) overflow() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue, w.reset = nil, true
	w.signal()
}

// end ends the watch (hub's mu held).
func (w *Watch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done, w.queue = true, nil
	w.signal()
}

func (w *Watch) signal() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// Next returns the watch's next event, waiting for it within ctx. It
// returns ErrShutdown once the watch or the node is closed, or ctx's error.
// Next is for one goroutine at a time.
func (w *Watch) Next(ctx context.Context) (WatchEvent, error) {
	for {
		w.mu.Lock()
		switch {
		case w.done:
			w.mu.Unlock()
			return WatchEvent{}, ErrShutdown
		case w.reset:
			w.mu.Unlock()
			ev, ok, wait := w.hub.resetOf(w)
			if ok {
				return ev, nil
			}
			if !wait {
				continue
			}
		case len(w.queue) > 0:
			ev := w.queue[0]
			w.queue[0] = WatchEvent{}
			w.queue = w.queue[1:]
			w.mu.Unlock()
			return ev, nil
		default:
			w.mu.Unlock()
		}
		select {
		case <-w.ready:
		case <-ctx.Done():
			return WatchEvent{}, ctx.Err()
		}
	}
}

// resetOf reads w's key and the table's position together, and makes w
// deliver only what comes after: the events up to that position are in
// the state read. It reports false if w needs no reset any more, and wait
// if the node has not reached the position w was given events up to: a
// reset is never dated below it, so w waits (advancedLocked wakes it).
func (h *watchHub) resetOf(w *Watch) (ev WatchEvent, ok, wait bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.reset || w.done {
		return WatchEvent{}, false, false
	}
	var l fsm.Lease
	var held bool
	var pos uint64
	if w.prefix {
		pos = h.table.Position()
	} else {
		l, held, pos = h.table.WatchRead(w.key)
	}
	if pos < max(w.after, w.last) {
		if _, ok := h.behind[w]; !ok {
			h.behind[w] = struct{}{}
			h.behindN.Add(1)
		}
		return WatchEvent{}, false, true
	}
	ev = WatchEvent{Kind: EventReset, Position: pos}
	if !w.prefix {
		ev.Key = w.key
	}
	if held && l.Token != 0 {
		ev.Owner, ev.Token, ev.Value = l.Owner, l.Token, sessionValue(l)
	}
	w.queue, w.reset = nil, false
	w.after = max(w.after, pos)
	return ev, true, false
}

// Close ends the watch: Next returns ErrShutdown. It is safe to call more
// than once.
func (w *Watch) Close() {
	w.hub.remove(w)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done, w.queue = true, nil
	w.signal()
}

// maxWatchWindow bounds Config.WatchWindow: the ring is allocated whole.
const maxWatchWindow = 1 << 24

// watchBytes bounds the memory of the retained events besides the ring
// itself: an owner is a string's whole value, which a Redis SET can make
// large, and the ring would keep every value a key had. Past it the oldest
// events go first, as past WatchWindow.
const watchBytes = 64 << 20
