package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/tidwall/match"
)

// The feed: POST /api/feed?prefix=p&from=n answers a stream of JSON lines,
// each an object with a "type":
//
//	locks     FENCE.LOCKS PREFIX p as the user, every ListEvery: position,
//	          leader (whose queues the waiters are), next, locks
//	sessions  FENCE.SESSIONS as the user, every ListEvery
//	health    FENCE.HEALTH (admins only), every ListEvery
//	cluster   FENCE.CLUSTER (admins only): the cluster ID, each member's
//	          version; at the start and every clusterEvery
//	event     one event of the watch by prefix, filtered by the user's
//	          pattern: kind, key, position, owner, token, value
//	error     what one of the reads answered (source, error); the feed goes on
//	paced     the events outran maxEventRate: some are left out
//
// With from > 0 the watch resumes after that position (the page reconnects
// with the last position it saw), else it starts from the node's present.

// clusterEvery is how often the feed re-reads FENCE.CLUSTER: it asks every
// member for its version, and changes with membership only.
const clusterEvery = 10 * time.Second

// maxFeeds bounds one session's feeds at once (tabs).
const maxFeeds = 4

func (c *Console) feed(w http.ResponseWriter, r *http.Request, s *session) {
	prefix := r.URL.Query().Get("prefix")
	if !isPrefixOK(prefix) {
		httpError(w, http.StatusBadRequest, "prefix: at most 1024 bytes, no line breaks")
		return
	}
	var from uint64
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			httpError(w, http.StatusBadRequest, "from: want a log position")
			return
		}
		from = n
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	if !c.feedStarted(s) {
		httpError(w, http.StatusTooManyRequests, "this session has its maximum of feeds open (close a tab)")
		return
	}
	defer c.feedEnded(s)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // logout or expiry ends it
	defer stop()

	lines := make(chan any, 64)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()

	if c.cfg.Watches != nil {
		wt, err := c.cfg.Watches.WatchPrefix(prefix, from, from > 0)
		if err != nil {
			send(ctx, lines, errorLine("watch", err))
		} else {
			go c.pumpWatch(ctx, wt, s.pattern, lines)
		}
	} else {
		send(ctx, lines, errorLine("watch", errors.New("this node has no watch by prefix: the listing shows changes within a second")))
	}
	go c.poll(ctx, c.cfg.ListEvery, lines, func(ctx context.Context) any {
		return c.read(ctx, s, "locks", "FENCE.LOCKS", "PREFIX", prefix, "COUNT", server.MaxListCount)
	})
	go c.poll(ctx, c.cfg.ListEvery, lines, func(ctx context.Context) any {
		return c.read(ctx, s, "sessions", "FENCE.SESSIONS", "COUNT", 100)
	})
	if s.admin() {
		go c.poll(ctx, c.cfg.ListEvery, lines, func(ctx context.Context) any {
			return c.read(ctx, s, "health", "FENCE.HEALTH")
		})
		go c.poll(ctx, clusterEvery, lines, func(ctx context.Context) any {
			return c.read(ctx, s, "cluster", "FENCE.CLUSTER")
		})
	}
	enc := json.NewEncoder(w)
	for {
		select {
		case <-ctx.Done():
			return
		case l := <-lines:
			if err := enc.Encode(l); err != nil {
				return
			}
			if len(lines) == 0 {
				flusher.Flush()
			}
		}
	}
}

func (c *Console) feedStarted(s *session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.feeds[s]
	if n >= maxFeeds {
		return false
	}
	c.feeds[s] = n + 1
	return true
}

func (c *Console) feedEnded(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.lastUsed = time.Now() // idle from now
	if c.feeds[s]--; c.feeds[s] <= 0 {
		delete(c.feeds, s)
	}
}

// poll sends read's line at once and then every interval, each read
// starting when the last one ended (a slow leader gets no pile-up).
func (c *Console) poll(ctx context.Context, every time.Duration, lines chan<- any, read func(context.Context) any) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !send(ctx, lines, read(ctx)) {
			return
		}
		t.Reset(every)
	}
}

// read runs one read as s's user and returns its line.
func (c *Console) read(ctx context.Context, s *session, typ string, args ...any) any {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := s.rdb.Do(ctx, args...).Result()
	if err != nil {
		return errorLine(typ, err)
	}
	m, ok := jsonable(v).(map[string]any)
	if !ok {
		return errorLine(typ, errors.New("unexpected reply"))
	}
	m["type"] = typ
	m["at"] = time.Now().UnixMilli()
	return m
}

func errorLine(source string, err error) map[string]any {
	return map[string]any{"type": "error", "source": source, "error": err.Error(), "at": time.Now().UnixMilli()}
}

// eventLine is one watch event as the page reads it.
type eventLine struct {
	Type     string `json:"type"`
	Kind     string `json:"kind"`
	Key      string `json:"key"`
	Position uint64 `json:"position"`
	Owner    string `json:"owner"`
	Token    uint64 `json:"token"`
	Value    string `json:"value,omitempty"`
	At       int64  `json:"at"`
}

// maxEventRate is the most events a second one feed sends. A page cannot
// show more, and an open console must not take a busy node's CPU: past it
// the feed stops reading until the next second, the node drops what the
// watch's queue cannot hold (cheaply: the watch is then sent a reset), and
// the page shows the listing's state, read every second anyway.
const maxEventRate = 200

// pumpWatch sends wt's events whose keys pattern allows until ctx ends,
// then closes wt.
func (c *Console) pumpWatch(ctx context.Context, wt *server.Watch, pattern string, lines chan<- any) {
	defer wt.Close()
	second, sent := time.Now(), 0
	for {
		if sent >= maxEventRate {
			wait := time.Until(second.Add(time.Second))
			if !send(ctx, lines, map[string]any{"type": "paced", "at": time.Now().UnixMilli(),
				"error": "more than " + strconv.Itoa(maxEventRate) + " events a second: some are left out; the listing shows the state"}) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		if now := time.Now(); now.Sub(second) >= time.Second {
			second, sent = now, 0
		}
		ev, err := wt.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				send(ctx, lines, errorLine("watch", err))
			}
			return
		}
		if ev.Key != "" && pattern != "*" && !match.Match(ev.Key, pattern) {
			continue
		}
		sent++
		if !send(ctx, lines, eventLine{Type: "event", Kind: ev.Kind.String(), Key: ev.Key, Position: ev.Position,
			Owner: ev.Owner, Token: ev.Token, Value: ev.Value, At: time.Now().UnixMilli()}) {
			return
		}
	}
}

func send(ctx context.Context, lines chan<- any, l any) bool {
	select {
	case lines <- l:
		return true
	case <-ctx.Done():
		return false
	}
}
