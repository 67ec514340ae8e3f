package redisbridge

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/tidwall/redcon"
)

// Watches (docs/protocol.md, Watches): FENCE.WATCH key [FROM position]
// pushes every change of the key's holder to the connection, served by this
// node from its own applied log, never forwarded. A watching connection is
// detached from redcon's loop as a subscribed one is, and shares the
// subscriber's writer: the confirmation, the events and the replies are
// queued on one channel in order. In RESP3 the events are push messages;
// in RESP2 they are arrays, and only the commands allowed while subscribed
// (plus FENCE.WATCH and FENCE.UNWATCH) are served, as in Redis's subscribe
// mode.
//
// The shapes, each an array (RESP2) or a push (RESP3):
//
//	fence.watch   key watches         confirms FENCE.WATCH
//	fence.unwatch key watches         confirms FENCE.UNWATCH, per key
//	fence.event   key kind position owner token value
//
// where watches is the number of keys the connection still watches, kind
// is granted, released, expired, revoked or reset, position an integer,
// owner a bulk string and token an integer (a reset of a free key has
// owner "" and token 0).
//
// FENCE.WATCH PREFIX p [FROM position] watches every key that starts with
// p (server.Node.WatchPrefix), as PSUBSCRIBE does a pattern: the forms are
// told apart by their count (a key form has 2 or 4 arguments, the prefix
// form 3 or 5), so a key named PREFIX is still watched by FENCE.WATCH
// PREFIX [FROM position]. Its messages name the prefix, as pmessage names
// the pattern, so that a connection watching a key and a prefix that
// covers it can tell the two streams apart:
//
//	fence.pwatch   prefix watches     confirms FENCE.WATCH PREFIX
//	fence.punwatch prefix watches     confirms FENCE.UNWATCH PREFIX p
//	fence.pevent   prefix key kind position owner token value
//
// A prefix watch's reset has key "", owner "" and token 0: the state under
// the prefix as of its position is what FENCE.LOCKS reads. Only the events
// of names the user's pattern allows are sent (checked as each comes: the
// prefix itself names no lock).

// maxConnWatches bounds the keys one connection watches, and
// maxConnPrefixWatches the prefixes; the node bounds its watches in all
// (server.Config.MaxWatches, MaxPrefixWatches).
const (
	maxConnWatches       = 1024
	maxConnPrefixWatches = 16
)

// watchNode is what watches need of the node.
type watchNode interface {
	Watch(key string, from uint64, resume bool) (*server.Watch, error)
	WatchPrefix(prefix string, from uint64, resume bool) (*server.Watch, error)
}

// isPrefixWatch reports whether args (the command's name first) are
// FENCE.WATCH's or FENCE.UNWATCH's prefix form, PREFIX p [FROM position].
func isPrefixWatch(args [][]byte) bool {
	return (len(args) == 3 || len(args) == 5) && strings.EqualFold(string(args[1]), "prefix")
}

// connWatch is one watched key, or prefix, of a connection. Its pump
// writes the watch's events until the connection closes or it is
// unwatched.
type connWatch struct {
	w       *server.Watch
	stopped bool // under the subscriber's mu: no event is queued any more
	cancel  context.CancelFunc
	// visible, for a prefix watch of a user limited to a pattern, is the
	// pattern's check of each event's key.
	visible func(string) bool
}

// watch: FENCE.WATCH key [FROM position], or FENCE.WATCH PREFIX p [FROM
// position].
func (b *Bridge) watch(r *request) {
	prefix := isPrefixWatch(r.args)
	args := r.args[1:]
	if prefix {
		args = args[1:]
	}
	if len(args) == 2 { // FROM without its position
		wrongArity(r)
		return
	}
	name := string(args[0])
	var from uint64
	resume := len(args) == 3
	if resume {
		if !strings.EqualFold(string(args[1]), "from") {
			writeError(r.c, errOption(args[1], "FROM position"))
			return
		}
		v, err := strconv.ParseUint(string(args[2]), 10, 64)
		if err != nil {
			writeError(r.c, errArg("from", "a log position (a whole number)", args[2]))
			return
		}
		from = v
	}
	watches := &r.conn.watches
	if prefix {
		watches = &r.conn.pwatches
	}
	old := (*watches)[name]
	switch {
	case old == nil && !prefix && len(r.conn.watches) >= maxConnWatches:
		writeError(r.c, errf("too many watches on this connection: at most %d; FENCE.UNWATCH a key first", maxConnWatches))
		return
	case old == nil && prefix && len(r.conn.pwatches) >= maxConnPrefixWatches:
		writeError(r.c, errf("too many prefix watches on this connection: at most %d; FENCE.UNWATCH PREFIX p first", maxConnPrefixWatches))
		return
	}
	var w *server.Watch
	var err error
	if prefix {
		w, err = b.locker.WatchPrefix(name, from, resume)
	} else {
		w, err = b.locker.Watch(name, from, resume)
	}
	if err != nil {
		writeErr(r.c, err)
		return
	}
	s, fresh := b.subscriberOf(r)
	if s == nil {
		w.Close()
		return
	}
	if fresh {
		defer func() { go b.serveDetached(s) }()
	}
	if *watches == nil {
		*watches = make(map[string]*connWatch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old != nil {
		// A watch of a key (prefix) already watched replaces it: what
		// follows the confirmation is the new watch's.
		old.stop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cw := &connWatch{w: w, cancel: cancel}
	if prefix {
		cw.visible = allowedKeys(r.conn.user)
	}
	(*watches)[name] = cw
	word := "fence.watch"
	if prefix {
		word = "fence.pwatch"
	}
	s.send(appendWatchConfirm(nil, s.st.proto, word, name, prefix, r.conn.watchCount()))
	go b.pump(ctx, s, cw)
}

// stop ends cw's events (the subscriber's mu held).
func (cw *connWatch) stop() {
	cw.stopped = true
	cw.cancel()
	cw.w.Close()
}

// unwatch: FENCE.UNWATCH [key ...]; without keys, every key and prefix;
// FENCE.UNWATCH PREFIX p, the prefix p (keys named PREFIX and p are
// unwatched by FENCE.UNWATCH p PREFIX).
func (b *Bridge) unwatch(r *request) {
	type target struct {
		name   string
		prefix bool
	}
	var ts []target
	switch {
	case isPrefixWatch(r.args):
		ts = append(ts, target{string(r.args[2]), true})
	case len(r.args) == 1:
		for k := range r.conn.watches {
			ts = append(ts, target{name: k})
		}
		for p := range r.conn.pwatches {
			ts = append(ts, target{p, true})
		}
	default:
		for _, k := range r.args[1:] {
			ts = append(ts, target{name: string(k)})
		}
	}
	proto := r.conn.proto
	s := r.conn.sub
	if s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		proto = s.st.proto
	}
	// Never watched, or nothing watched: the confirmations, with nothing
	// watched.
	var p []byte
	if len(ts) == 0 {
		p = appendWatchConfirm(p, proto, "fence.unwatch", "", false, 0)
	}
	for _, t := range ts {
		watches, word := r.conn.watches, "fence.unwatch"
		if t.prefix {
			watches, word = r.conn.pwatches, "fence.punwatch"
		}
		if cw := watches[t.name]; cw != nil {
			cw.stop()
			delete(watches, t.name)
		}
		p = appendWatchConfirm(p, proto, word, t.name, t.prefix, r.conn.watchCount())
	}
	if s == nil {
		r.c.WriteRaw(p)
		return
	}
	s.send(p)
}

// unwatchAll ends every watch of the connection, silently (RESET).
func (b *Bridge) unwatchAll(st *connState) {
	if !st.watching() {
		return
	}
	st.sub.mu.Lock()
	defer st.sub.mu.Unlock()
	for k, cw := range st.watches {
		cw.stop()
		delete(st.watches, k)
	}
	for k, cw := range st.pwatches {
		cw.stop()
		delete(st.pwatches, k)
	}
}

// watching reports whether the connection watches a key or a prefix.
func (st *connState) watching() bool { return st.watchCount() > 0 }

// watchCount is how many keys and prefixes the connection watches, the
// count its confirmations carry.
func (st *connState) watchCount() int { return len(st.watches) + len(st.pwatches) }

// pumpHeadroom is how much of the subscriber's queue a pump leaves free
// for replies and other messages: a pump waits rather than fill it, and a
// watch whose events pile up meanwhile is sent a reset by the node.
const pumpHeadroom = subscriberQueue / 2

// pumpBackoff is how long a pump waits for the queue to drain.
const pumpBackoff = 10 * time.Millisecond

// pump writes cw's events to the connection until it closes or the key is
// unwatched. It waits for a client that reads slowly, never the node: the
// node drops what piles up for it and sends a reset (server.Watch).
func (b *Bridge) pump(ctx context.Context, s *subscriber, cw *connWatch) {
	defer cw.w.Close()
	defer cw.cancel()
	go func() {
		select {
		case <-s.done:
			cw.cancel()
		case <-ctx.Done():
		}
	}()
	var t *time.Timer
	for {
		ev, err := cw.w.Next(ctx)
		if err != nil {
			return
		}
		if cw.visible != nil && ev.Kind != server.EventReset && !cw.visible(ev.Key) {
			continue
		}
		for len(s.out) > pumpHeadroom {
			if t == nil {
				t = time.NewTimer(pumpBackoff)
			} else {
				t.Reset(pumpBackoff)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		s.mu.Lock()
		if !cw.stopped {
			if cw.w.Prefix() {
				s.send(appendPrefixEvent(nil, s.st.proto, cw.w.Key(), ev))
			} else {
				s.send(appendWatchEvent(nil, s.st.proto, ev))
			}
		}
		s.mu.Unlock()
	}
}

// appendWatchConfirm appends [word, key, watches]; an empty key is a null,
// as UNSUBSCRIBE without channels answers (a prefix, which may be empty,
// is always a string).
func appendWatchConfirm(p []byte, proto int, word, key string, prefix bool, n int) []byte {
	p = pushHeader(p, proto, 3)
	p = redcon.AppendBulkString(p, word)
	switch {
	case key != "" || prefix:
		p = redcon.AppendBulkString(p, key)
	case proto == 3:
		p = append(p, "_\r\n"...)
	default:
		p = redcon.AppendNull(p)
	}
	return redcon.AppendInt(p, int64(n))
}

// appendWatchEvent appends [fence.event, key, kind, position, owner,
// token, value].
func appendWatchEvent(p []byte, proto int, ev server.WatchEvent) []byte {
	p = pushHeader(p, proto, 7)
	p = redcon.AppendBulkString(p, "fence.event")
	return appendEventFields(p, ev)
}

// appendPrefixEvent appends [fence.pevent, prefix, key, kind, position,
// owner, token, value].
func appendPrefixEvent(p []byte, proto int, prefix string, ev server.WatchEvent) []byte {
	p = pushHeader(p, proto, 8)
	p = redcon.AppendBulkString(p, "fence.pevent")
	p = redcon.AppendBulkString(p, prefix)
	return appendEventFields(p, ev)
}

// appendEventFields appends an event's key, kind, position, owner, token
// and value.
func appendEventFields(p []byte, ev server.WatchEvent) []byte {
	p = redcon.AppendBulkString(p, ev.Key)
	p = redcon.AppendBulkString(p, ev.Kind.String())
	p = redcon.AppendUint(p, ev.Position)
	p = redcon.AppendBulkString(p, ev.Owner)
	p = redcon.AppendUint(p, ev.Token)
	return redcon.AppendBulkString(p, ev.Value)
}
