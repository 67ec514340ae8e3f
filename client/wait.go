package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxRound caps one wait whatever the TTL, so that a long TTL does not pin a
// request to one node for long (and stays below the server's --max-wait,
// 1h by default).
const maxRound = 30 * time.Second

// minRound is the shortest wait the client falls back to when the server
// refuses longer ones.
const minRound = 100 * time.Millisecond

// roundLength is how long one FENCE.ACQUIRE … WAIT waits: half the TTL, so
// that a grant arriving at the very end of a wait still has half its
// validity, counted from before the request was sent.
func roundLength(ttl time.Duration) time.Duration {
	return max(min(ttl/2, maxRound), time.Millisecond)
}

// roundResult is the outcome of one wait.
type roundResult struct {
	id      int
	n       *node
	g       grant
	granted bool
	// early is set for a null reply that came well before the wait ended:
	// a refusal, not a wait that ran out.
	early bool
	err   error
}

// waitAcquire queues for name on the server (FENCE.ACQUIRE … WAIT) and
// returns the grant. Waits are issued in overlapping rounds: a new round
// starts halfway through the current one, and the server puts it in the
// older one's place in the line (one waiter per key and owner), answering
// the older one null. So the place in the queue is kept while no single
// wait lasts longer than half the TTL. There is no polling: a round ends
// early only if it is granted or replaced.
//
// Each round runs on a connection of its own, closed if the caller gives
// up, which takes the waiter out of the server's queue at once.
//
// Several keys at once wait the same way: the server puts a newer wait for
// the same keys by the same owner in the older one's place in every key's
// queue. A grant that arrives with its validity (counted from the send)
// spent is renewed by acquireReq.
func (c *Client) waitAcquire(ctx context.Context, q lockReq) (grant, error) {
	round := roundLength(q.ttl)
	done := make(chan struct{})
	defer close(done)
	results := make(chan roundResult)
	// Rounds outlive this call on purpose after a grant: a round still in
	// flight can only renew the same lease, and cutting it off could make
	// the server revoke a grant it was delivering. They end within their
	// wait plus the request timeout.
	base := context.WithoutCancel(ctx)
	var cancels []context.CancelFunc
	cancelAll := func() {
		for _, cancel := range cancels {
			cancel()
		}
	}
	latest := 0
	start := func() bool {
		wait := round
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait < time.Millisecond {
			return false
		}
		latest++
		id := latest
		rctx, cancel := context.WithCancel(base)
		stop := context.AfterFunc(c.ctx, cancel)
		cancels = append(cancels, cancel)
		// A refusal of the credentials or TLS, which pick reports, comes
		// back from the round itself.
		n, _ := c.pick(ctx)
		go func() {
			defer cancel()
			defer stop()
			began := time.Now()
			g, granted, err := c.waitRound(rctx, n, q, wait)
			early := err == nil && !granted && time.Since(began) < wait-wait/10
			select {
			case results <- roundResult{id: id, n: n, g: g, granted: granted, early: early, err: err}:
			case <-done:
			}
		}()
		return true
	}
	giveUp := func(err error) (grant, error) {
		cancelAll()
		c.releaseLater(q)
		return grant{}, err
	}

	start()
	next := time.NewTimer(round / 2)
	defer next.Stop()
	// rearm schedules the next overlapping round.
	rearm := func() { next.Reset(round / 2) }
	var failedSince time.Time
	var last error
	failures, refusals := 0, 0
	for {
		select {
		case <-ctx.Done():
			if last != nil {
				return giveUp(stopped(ctx, last))
			}
			return giveUp(fmt.Errorf("%w (%w)", ctx.Err(), ErrLocked))
		case <-c.ctx.Done():
			return giveUp(context.Cause(c.ctx))
		case <-next.C:
			// The latest round was not refused at once.
			refusals = 0
			start()
			rearm()
		case r := <-results:
			if r.err == nil && r.granted {
				return r.g, nil
			}
			if r.id != latest {
				continue // replaced by a newer round, or failed after it started
			}
			if r.err == nil && r.early {
				// Answered null at once, not after waiting. Twice in a
				// row, that is a refusal: the server remembers this
				// owner's release of the lock. Once can also be an older
				// wait of ours taking this one's place, if a node re-sent
				// it after a leader change: then the next wait takes its
				// place again.
				if refusals++; refusals >= 2 {
					return giveUp(ErrLocked)
				}
				start()
				rearm()
				continue
			}
			if r.err == nil {
				// The wait ran out before a newer one took its place (a
				// slow link, or the place was lost in a leader change):
				// queue again at once.
				failedSince, failures, last, refusals = time.Time{}, 0, nil, 0
				start()
				rearm()
				continue
			}
			f := classify(r.err)
			if f.arg == "wait" && round > minRound {
				// The server allows shorter waits (fencerd --max-wait).
				round = max(round/2, minRound)
				start()
				rearm()
				continue
			}
			if !f.transient {
				return giveUp(f.err)
			}
			last = fmt.Errorf("%s: %w", r.n.addr, r.err)
			c.failed(r.n, f.leader)
			if failedSince.IsZero() {
				failedSince = time.Now()
			} else if time.Since(failedSince) >= c.cfg.failoverTimeout {
				return giveUp(unavailable(last))
			}
			failures++
			if failures%len(c.nodes) == 0 {
				// Every node failed once more: pause before the next round.
				next.Reset(jitter(min(minBackoff<<min(failures/len(c.nodes), 8), maxBackoff)))
				continue
			}
			start()
			rearm()
		}
	}
}

// waitRound sends one FENCE.ACQUIRE … WAIT to n on a connection of its own,
// which is closed when ctx ends.
func (c *Client) waitRound(ctx context.Context, n *node, q lockReq, wait time.Duration) (grant, bool, error) {
	opts := n.opts
	opts.PoolSize = 1
	opts.MinIdleConns = 0
	dial := opts.Dialer
	if dial == nil {
		d := &net.Dialer{Timeout: c.cfg.requestTimeout, KeepAlive: 5 * time.Minute}
		dial = d.DialContext
	}
	opts.Dialer = func(dctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(dctx, network, addr)
		if err != nil {
			return nil, err
		}
		context.AfterFunc(ctx, func() { _ = conn.Close() })
		return conn, nil
	}
	rdb := redis.NewClient(&opts)
	defer rdb.Close()
	rctx, cancel := context.WithTimeout(ctx, wait+c.cfg.requestTimeout)
	defer cancel()
	sent := time.Now()
	v, err := rdb.Do(rctx, q.acquireArgs(wait)...).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return grant{}, false, nil
	case err != nil:
		return grant{}, false, err
	}
	return parseGrant(v, q, sent)
}
