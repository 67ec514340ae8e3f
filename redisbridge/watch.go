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

// maxConnWatches bounds the keys one connection watches; the node bounds
// its watches in all (server.Config.MaxWatches).
const maxConnWatches = 1024

// watchNode is what watches need of the node.
type watchNode interface {
	Watch(key string, from uint64, resume bool) (*server.Watch, error)
}

// connWatch is one watched key of a connection. Its pump writes the
// watch's events until the connection closes or the key is unwatched.
type connWatch struct {
	w       *server.Watch
	stopped bool // under the subscriber's mu: no event is queued any more
	cancel  context.CancelFunc
}

// watch: FENCE.WATCH key [FROM position].
func (b *Bridge) watch(r *request) {
	if len(r.args) == 3 { // FROM without its position
		wrongArity(r)
		return
	}
	key := string(r.args[1])
	var from uint64
	resume := len(r.args) == 4
	if resume {
		if !strings.EqualFold(string(r.args[2]), "from") {
			writeError(r.c, errOption(r.args[2], "FROM position"))
			return
		}
		v, err := strconv.ParseUint(string(r.args[3]), 10, 64)
		if err != nil {
			writeError(r.c, errArg("from", "a log position (a whole number)", r.args[3]))
			return
		}
		from = v
	}
	old := r.conn.watches[key]
	if old == nil && len(r.conn.watches) >= maxConnWatches {
		writeError(r.c, errf("too many watches on this connection: at most %d; FENCE.UNWATCH a key first", maxConnWatches))
		return
	}
	w, err := b.locker.Watch(key, from, resume)
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
	if r.conn.watches == nil {
		r.conn.watches = make(map[string]*connWatch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old != nil {
		// A watch of a key already watched replaces it: what follows the
		// confirmation is the new watch's.
		old.stop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cw := &connWatch{w: w, cancel: cancel}
	r.conn.watches[key] = cw
	s.send(appendWatchConfirm(nil, s.st.proto, "fence.watch", key, len(r.conn.watches)))
	go b.pump(ctx, s, cw)
}

// stop ends cw's events (the subscriber's mu held).
func (cw *connWatch) stop() {
	cw.stopped = true
	cw.cancel()
	cw.w.Close()
}

// unwatch: FENCE.UNWATCH [key ...]; without keys, every key.
func (b *Bridge) unwatch(r *request) {
	keys := make([]string, 0, len(r.args)-1)
	for _, k := range r.args[1:] {
		keys = append(keys, string(k))
	}
	if len(r.args) == 1 {
		for k := range r.conn.watches {
			keys = append(keys, k)
		}
	}
	s := r.conn.sub
	if s == nil {
		// Never watched: the confirmations, with nothing watched.
		if len(keys) == 0 {
			r.c.WriteRaw(appendWatchConfirm(nil, r.conn.proto, "fence.unwatch", "", 0))
		}
		for _, k := range keys {
			r.c.WriteRaw(appendWatchConfirm(nil, r.conn.proto, "fence.unwatch", k, 0))
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var p []byte
	if len(keys) == 0 {
		p = appendWatchConfirm(p, s.st.proto, "fence.unwatch", "", 0)
	}
	for _, k := range keys {
		if cw := r.conn.watches[k]; cw != nil {
			cw.stop()
			delete(r.conn.watches, k)
		}
		p = appendWatchConfirm(p, s.st.proto, "fence.unwatch", k, len(r.conn.watches))
	}
	s.send(p)
}

// unwatchAll ends every watch of the connection, silently (RESET).
func (b *Bridge) unwatchAll(st *connState) {
	if len(st.watches) == 0 {
		return
	}
	st.sub.mu.Lock()
	defer st.sub.mu.Unlock()
	for k, cw := range st.watches {
		cw.stop()
		delete(st.watches, k)
	}
}

// watching reports whether the connection watches a key.
func (st *connState) watching() bool { return len(st.watches) > 0 }

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
			s.send(appendWatchEvent(nil, s.st.proto, ev))
		}
		s.mu.Unlock()
	}
}

// appendWatchConfirm appends [word, key, watches]; an empty key is a null,
// as UNSUBSCRIBE without channels answers.
func appendWatchConfirm(p []byte, proto int, word, key string, n int) []byte {
	p = pushHeader(p, proto, 3)
	p = redcon.AppendBulkString(p, word)
	switch {
	case key != "":
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
	p = redcon.AppendBulkString(p, ev.Key)
	p = redcon.AppendBulkString(p, ev.Kind.String())
	p = redcon.AppendUint(p, ev.Position)
	p = redcon.AppendBulkString(p, ev.Owner)
	p = redcon.AppendUint(p, ev.Token)
	return redcon.AppendBulkString(p, ev.Value)
}
