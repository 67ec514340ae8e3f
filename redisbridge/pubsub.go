package redisbridge

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/tidwall/match"
	"github.com/tidwall/redcon"
)

// Pub/sub, as much of it as lock libraries need: a client waiting for a
// lock SUBSCRIBEs to the lock's channel (Redisson; or SSUBSCRIBEs, with
// sharded pub/sub) or PSUBSCRIBEs to a pattern of them (Spring
// Integration's RedisLockRegistry), and the unlock script publishes to it.
// A publish reaches the subscribers of every node, as in Redis Cluster: the
// node where it happens relays it to the others. Patterns match as KEYS
// does (tidwall/match: * and ?, no [...] classes).

// subscriberQueue bounds the replies and messages waiting to be written to
// one subscribed connection; a client that lets it fill up is disconnected,
// as Redis does with a pub/sub client over its output buffer limit.
const subscriberQueue = 4096

// relayTimeout bounds relaying one publish to the other nodes.
const relayTimeout = 2 * time.Second

// hub keeps the subscriptions of this node's connections.
type hub struct {
	mu     sync.Mutex
	chans  map[string]map[*subscriber]bool // "c:", "s:" or "p:" (pattern) + channel
	pats   map[string]bool                 // the patterns of chans, which every publish is matched against
	all    map[*subscriber]bool
	closed bool
}

// subscriber is a connection that subscribed to a channel. It has been
// detached from redcon's loop: serveDetached reads its commands, and one
// writer goroutine writes everything queued on out, so that a publish from
// another connection never races with a reply.
type subscriber struct {
	dc   redcon.DetachedConn
	st   *connState
	mu   sync.Mutex // orders a subscription and its confirmation against messages
	out  chan []byte
	done chan struct{}
	once sync.Once
	// chans and n (subscriptions: plain and patterns, as Redis counts
	// them together; shard) are written under hub.mu, and only by the
	// connection's own goroutine, which alone reads n.
	chans map[string]bool
	n     [2]int
}

func newHub() *hub {
	return &hub{chans: make(map[string]map[*subscriber]bool), pats: make(map[string]bool), all: make(map[*subscriber]bool)}
}

// count is how many channels the connection listens to.
func (s *subscriber) count() int {
	return s.n[0] + s.n[1]
}

// send queues p for the client, or disconnects a client that stopped
// reading.
func (s *subscriber) send(p []byte) {
	select {
	case <-s.done:
	case s.out <- p:
	default:
		s.close()
	}
}

// close disconnects the client. It closes the socket itself: redcon's
// Close would flush the writer, which only writeLoop may touch.
func (s *subscriber) close() {
	s.once.Do(func() {
		close(s.done)
		_ = s.dc.NetConn().Close()
	})
}

// writeLoop writes what is queued until the connection closes. A nil
// entry asks for the connection to be closed once everything before it is
// written (QUIT).
func (s *subscriber) writeLoop() {
	for {
		select {
		case <-s.done:
			return
		case p := <-s.out:
			quit := p == nil
			s.dc.WriteRaw(p)
			for more := true; more && !quit; {
				select {
				case p = <-s.out:
					quit = p == nil
					s.dc.WriteRaw(p)
				default:
					more = false
				}
			}
			if nc := s.dc.NetConn(); nc != nil {
				_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			}
			if err := s.dc.Flush(); err != nil || quit {
				s.close()
				return
			}
		}
	}
}

// kindOf returns the hub prefix and the subscription count of a
// (S|P)SUBSCRIBE or (S|P)UNSUBSCRIBE.
func kindOf(cmd []byte) (prefix string, idx int, shard bool) {
	if strings.HasPrefix(strings.ToLower(string(cmd)), "p") && !strings.EqualFold(string(cmd), "publish") {
		return "p:", 0, false
	}
	if strings.HasPrefix(strings.ToLower(string(cmd)), "s") && !strings.EqualFold(string(cmd), "subscribe") {
		return "s:", 1, true
	}
	return "c:", 0, false
}

// pushHeader starts a pub/sub reply or message of n elements: a RESP3 push,
// or a RESP2 array.
func pushHeader(p []byte, proto, n int) []byte {
	if proto == 3 {
		return append(append(append(p, '>'), byte('0'+n)), '\r', '\n')
	}
	return redcon.AppendArray(p, n)
}

// subscriberOf returns the connection's subscriber. The first subscription
// (or watch) makes it and takes the connection out of redcon's loop: fresh
// then says that the caller must start serveDetached, which reads its
// commands from now on, once its reply is queued, so that the replies keep
// their order. It returns nil if the bridge is closing.
func (b *Bridge) subscriberOf(r *request) (s *subscriber, fresh bool) {
	if s = r.conn.sub; s != nil {
		return s, false
	}
	s = &subscriber{st: r.conn, out: make(chan []byte, subscriberQueue), done: make(chan struct{}), chans: map[string]bool{}}
	s.dc = r.c.Detach()
	r.conn.sub, r.conn.detached = s, true
	if !b.hub.track(s) {
		s.close()
		b.open.Add(-1)
		return nil, false
	}
	go s.writeLoop()
	return s, true
}

// subscribe: (S|P)SUBSCRIBE channel|pattern [...].
func (b *Bridge) subscribe(r *request) {
	s, fresh := b.subscriberOf(r)
	if s == nil {
		return
	}
	if fresh {
		defer func() { go b.serveDetached(s) }()
	}
	prefix, idx, _ := kindOf(r.args[0])
	word := strings.ToLower(string(r.args[0]))
	s.mu.Lock()
	defer s.mu.Unlock()
	var p []byte
	for _, ch := range r.args[1:] {
		p = appendConfirm(p, s.st.proto, word, ch, b.hub.add(s, prefix, string(ch), idx))
	}
	s.send(p)
}

// appendConfirm appends the confirmation of a (un)subscription to channel:
// [word, channel, subscriptions the connection has now].
func appendConfirm(p []byte, proto int, word string, channel []byte, n int) []byte {
	p = pushHeader(p, proto, 3)
	p = redcon.AppendBulkString(p, word)
	p = redcon.AppendBulk(p, channel)
	return redcon.AppendInt(p, int64(n))
}

// unsubscribe: (S|P)UNSUBSCRIBE [channel|pattern ...]; without any, from all.
func (b *Bridge) unsubscribe(r *request) {
	prefix, idx, _ := kindOf(r.args[0])
	word := strings.ToLower(string(r.args[0]))
	s := r.conn.sub
	if s == nil {
		// Never subscribed: one reply with no channel, or one per channel.
		chans := r.args[1:]
		if len(chans) == 0 {
			r.c.WriteRaw(pushHeader(nil, r.conn.proto, 3))
			r.c.WriteBulkString(word)
			r.null()
			r.c.WriteInt(0)
			return
		}
		for _, ch := range chans {
			r.c.WriteRaw(pushHeader(nil, r.conn.proto, 3))
			r.c.WriteBulkString(word)
			r.c.WriteBulk(ch)
			r.c.WriteInt(0)
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	chans := r.args[1:]
	if len(chans) == 0 {
		for _, ch := range b.hub.channels(s, prefix) {
			chans = append(chans, []byte(ch))
		}
	}
	var p []byte
	if len(chans) == 0 {
		p = pushHeader(p, s.st.proto, 3)
		p = redcon.AppendBulkString(p, word)
		if s.st.proto == 3 {
			p = append(p, "_\r\n"...)
		} else {
			p = redcon.AppendNull(p)
		}
		p = redcon.AppendInt(p, int64(b.hub.remove(s, prefix, "", idx)))
	}
	for _, ch := range chans {
		p = appendConfirm(p, s.st.proto, word, ch, b.hub.remove(s, prefix, string(ch), idx))
	}
	s.send(p)
}

// publish: (S)PUBLISH channel message → how many subscribers of this node
// received it. It is relayed to the other nodes too, unless it came from
// one of them.
func (b *Bridge) publish(r *request) {
	_, _, shard := kindOf(r.args[0])
	n := b.publishLocal(shard, string(r.args[1]), r.args[2])
	if !r.conn.forwarded {
		b.relayPublish(shard, r.args[1], r.args[2])
	}
	r.c.WriteInt(n)
}

func (b *Bridge) publishLocal(shard bool, channel string, msg []byte) int {
	prefix, word := "c:", "message"
	if shard {
		prefix, word = "s:", "smessage"
	}
	subs := b.hub.subscribers(prefix + channel)
	for _, s := range subs {
		p := pushHeader(nil, s.st.proto, 3)
		p = redcon.AppendBulkString(p, word)
		p = redcon.AppendBulkString(p, channel)
		p = redcon.AppendBulk(p, msg)
		s.mu.Lock()
		s.send(p)
		s.mu.Unlock()
	}
	n := len(subs)
	if shard {
		return n
	}
	// Then the patterns, as Redis delivers them: after the channel's own
	// subscribers, once per matching pattern a connection listens to.
	for _, pm := range b.hub.matching(channel) {
		p := pushHeader(nil, pm.s.st.proto, 4)
		p = redcon.AppendBulkString(p, "pmessage")
		p = redcon.AppendBulkString(p, pm.pattern)
		p = redcon.AppendBulkString(p, channel)
		p = redcon.AppendBulk(p, msg)
		pm.s.mu.Lock()
		pm.s.send(p)
		pm.s.mu.Unlock()
		n++
	}
	return n
}

// patternSub is one connection's subscription to a pattern.
type patternSub struct {
	s       *subscriber
	pattern string
}

// matching returns the pattern subscriptions whose pattern matches channel.
func (h *hub) matching(channel string) []patternSub {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []patternSub
	for pat := range h.pats {
		if !match.Match(channel, pat) {
			continue
		}
		for s := range h.chans["p:"+pat] {
			out = append(out, patternSub{s: s, pattern: pat})
		}
	}
	return out
}

// relayPublish sends the message to every other member, in the background,
// over forwarding connections (so that they do not relay it again).
func (b *Bridge) relayPublish(shard bool, channel, msg []byte) {
	cmd := []byte("PUBLISH")
	if shard {
		cmd = []byte("SPUBLISH")
	}
	raw := resp.AppendCommand(nil, cmd, channel, msg)
	// The applied table's addresses, not Members: no Raft round trip (the
	// leader's Barrier would hold every relay back by a commit) stands
	// between the publish and the relay, while subscribers elsewhere wait.
	addrs := b.locker.PeerAddrs()
	go func() {
		ctx, cancel := context.WithTimeout(b.ctx, relayTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, addr := range addrs {
			wg.Add(1)
			go func(addr string) {
				defer wg.Done()
				if _, _, err := b.fwd.roundTrip(ctx, addr, 2, raw); err != nil {
					b.log.Debug("relaying a publish failed", "to", addr, "err", err)
				}
			}(addr)
		}
		wg.Wait()
	}()
}

// serveDetached reads and answers the commands of a subscribed connection.
func (b *Bridge) serveDetached(s *subscriber) {
	quit := false
	defer func() {
		b.hub.leaveAll(s)
		b.hub.untrack(s)
		if quit {
			// writeLoop closes the connection once the reply is written.
			select {
			case <-s.done:
			case <-time.After(10 * time.Second):
			}
		}
		s.close()
		b.open.Add(-1)
	}()
	for {
		cmd, err := s.dc.ReadCommand()
		if err != nil {
			return
		}
		bc := &bufConn{s: s}
		b.handle(bc, cmd)
		s.mu.Lock()
		if len(bc.buf) > 0 {
			s.send(bc.buf)
		}
		if bc.closed {
			s.send(nil)
		}
		s.mu.Unlock()
		if bc.closed {
			quit = true
			return
		}
	}
}

func (h *hub) track(s *subscriber) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.all[s] = true
	return true
}

func (h *hub) untrack(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.all, s)
}

// add subscribes s and returns its count of that kind.
func (h *hub) add(s *subscriber, prefix, channel string, idx int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := prefix + channel
	if !s.chans[k] {
		s.chans[k] = true
		s.n[idx]++
		if h.chans[k] == nil {
			h.chans[k] = make(map[*subscriber]bool)
			if prefix == "p:" {
				h.pats[channel] = true
			}
		}
		h.chans[k][s] = true
	}
	return s.n[idx]
}

// remove unsubscribes s (channel "" removes nothing) and returns its count.
func (h *hub) remove(s *subscriber, prefix, channel string, idx int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := prefix + channel
	if channel != "" && s.chans[k] {
		delete(s.chans, k)
		s.n[idx]--
		delete(h.chans[k], s)
		if len(h.chans[k]) == 0 {
			delete(h.chans, k)
			if prefix == "p:" {
				delete(h.pats, channel)
			}
		}
	}
	return s.n[idx]
}

func (h *hub) channels(s *subscriber, prefix string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for k := range s.chans {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k[len(prefix):])
		}
	}
	return out
}

func (h *hub) leaveAll(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range s.chans {
		delete(h.chans[k], s)
		if len(h.chans[k]) == 0 {
			delete(h.chans, k)
			if strings.HasPrefix(k, "p:") {
				delete(h.pats, k[2:])
			}
		}
	}
	s.chans = map[string]bool{}
	s.n = [2]int{}
}

func (h *hub) subscribers(k string) []*subscriber {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*subscriber, 0, len(h.chans[k]))
	for s := range h.chans[k] {
		out = append(out, s)
	}
	return out
}

// closeAll disconnects every subscribed connection (the bridge is closing).
func (h *hub) closeAll() {
	h.mu.Lock()
	h.closed = true
	all := make([]*subscriber, 0, len(h.all))
	for s := range h.all {
		all = append(all, s)
	}
	h.mu.Unlock()
	for _, s := range all {
		s.close()
	}
}

// bufConn is the redcon.Conn a command of a subscribed connection is
// answered on: it collects the reply, which serveDetached then queues.
type bufConn struct {
	s      *subscriber
	buf    []byte
	closed bool
}

func (c *bufConn) RemoteAddr() string             { return c.s.dc.RemoteAddr() }
func (c *bufConn) Close() error                   { c.closed = true; return nil }
func (c *bufConn) WriteError(msg string)          { c.buf = redcon.AppendError(c.buf, msg) }
func (c *bufConn) WriteString(str string)         { c.buf = redcon.AppendString(c.buf, str) }
func (c *bufConn) WriteBulk(bulk []byte)          { c.buf = redcon.AppendBulk(c.buf, bulk) }
func (c *bufConn) WriteBulkString(bulk string)    { c.buf = redcon.AppendBulkString(c.buf, bulk) }
func (c *bufConn) WriteInt(num int)               { c.buf = redcon.AppendInt(c.buf, int64(num)) }
func (c *bufConn) WriteInt64(num int64)           { c.buf = redcon.AppendInt(c.buf, num) }
func (c *bufConn) WriteUint64(num uint64)         { c.buf = redcon.AppendUint(c.buf, num) }
func (c *bufConn) WriteArray(count int)           { c.buf = redcon.AppendArray(c.buf, count) }
func (c *bufConn) WriteNull()                     { c.buf = redcon.AppendNull(c.buf) }
func (c *bufConn) WriteRaw(data []byte)           { c.buf = append(c.buf, data...) }
func (c *bufConn) WriteAny(v any)                 { c.buf = redcon.AppendAny(c.buf, v) }
func (c *bufConn) Context() any                   { return c.s.st }
func (c *bufConn) SetContext(any)                 {}
func (c *bufConn) SetReadBuffer(int)              {}
func (c *bufConn) Detach() redcon.DetachedConn    { return nil }
func (c *bufConn) ReadPipeline() []redcon.Command { return nil }
func (c *bufConn) PeekPipeline() []redcon.Command { return nil }
func (c *bufConn) NetConn() net.Conn              { return c.s.dc.NetConn() }
