package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
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

// rounds is a wait's rounds in flight, which can outlive waitAcquire: a
// round may still be on its way when another brings the grant (it was sent
// before that reply came). While the owner holds the lock, such a round gets
// the same grant back, renewed. But a read lock's or a permit's release is
// not remembered by the server, so a round reaching it after the lease
// ended would be granted anew, with a new token, to an owner no lease
// tracks, holding the key for a TTL. So waitAcquire returns the grant once
// the rounds in flight have come back (within a bound), and a round that
// comes back later with another token has its grant released at once.
//
// Such a round is not cut off when the lease ends: its connection's close
// could reach the server before the request itself, which would then be
// granted with nobody to see it. Left to its answer, it says what it got.
// Only a round whose outcome stayed unknown (its node failed, it timed
// out, or the wait gave up and cut it off), before or after the grant,
// leaves a doubt: its request may still reach the server. Then the owner's
// lock is released once more when the lease has ended and every round is
// back, repeated for about a second (releaseAgain). (A Mutex's plain lock
// needs none of this: its release is remembered and refuses late rounds.)
type rounds struct {
	c  *Client
	q  lockReq
	wg sync.WaitGroup // rounds not yet back

	mu      sync.Mutex
	cancels []context.CancelFunc
	won     uint64 // the token waitAcquire returned; 0 before or without one
	unknown bool   // a round came back with its outcome unknown
	ended   bool
}

// add counts a round sent, cut off by cancel.
func (rs *rounds) add(cancel context.CancelFunc) {
	rs.wg.Add(1)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.cancels = append(rs.cancels, cancel)
}

// cutOff ends every round still out: the server drops a waiter that hangs
// up (and hands back a grant made to it as it did).
func (rs *rounds) cutOff() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, cancel := range rs.cancels {
		cancel()
	}
}

// win records the token of the grant waitAcquire returns.
func (rs *rounds) win(token uint64) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.won = token
}

// late takes a round's result that did not bring the grant waitAcquire
// returns: from a round that failed or was replaced while waiting, or one
// that came back after the grant (or after the wait gave up).
func (rs *rounds) late(r roundResult) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch {
	case r.err == nil && r.granted && r.g.token != rs.won:
		// Granted anew, after the lease waitAcquire returned (if any)
		// had ended on the server: nobody holds this grant. The reply
		// came after the grant, so this release does too.
		rs.c.releaseLater(rs.q)
	case r.err != nil && classify(r.err).transient:
		rs.unknown = true
	}
}

// end is called when the lease ends (released, lost, the client closed) or
// the wait gave up: once every round is back, it releases the owner's lock
// again (releaseAgain) if a round's outcome stayed unknown. The owner is
// the lease's alone, so that release can free nothing else.
func (rs *rounds) end() {
	rs.mu.Lock()
	ended := rs.ended
	rs.ended = true
	rs.mu.Unlock()
	c := rs.c
	if ended || c.ctx.Err() != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		rs.wg.Wait()
		rs.mu.Lock()
		unknown := rs.unknown
		rs.mu.Unlock()
		if unknown {
			c.releaseAgain(rs.q)
		}
	}()
}

// follow ends rs when ctx (a lease's) ends. rs may be nil: the grant came
// without waiting.
func (rs *rounds) follow(ctx context.Context) {
	if rs != nil {
		context.AfterFunc(ctx, rs.end)
	}
}

// abandon ends rs for a grant that makes no lease. rs may be nil.
func (rs *rounds) abandon() {
	if rs != nil {
		rs.end()
	}
}

// waitAcquire queues for name on the server (FENCE.ACQUIRE … WAIT) and
// returns the grant, with its rounds (g.rounds), which the caller ends
// with the lease (rounds.follow) or at once if it makes none. Waits are
// issued in overlapping rounds: a new round starts halfway through the
// current one, and the server puts it in the older one's place in the line
// (one waiter per key and owner), answering the older one null. So the
// place in the queue is kept while no single wait lasts longer than half
// the TTL. There is no polling: a round ends early only if it is granted or
// replaced.
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
	// Rounds outlive this call (see rounds): cutting one off as soon as
	// another brings the grant could make the server revoke the grant it
	// was delivering on it. They end within their wait plus the request
	// timeout, or when rs ends.
	base := context.WithoutCancel(ctx)
	rs := &rounds{c: c, q: q}
	latest, inFlight := 0, 0
	start := func() bool {
		wait := round
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait < time.Millisecond {
			return false
		}
		latest++
		inFlight++
		id := latest
		rctx, cancel := context.WithCancel(base)
		stop := context.AfterFunc(c.ctx, cancel)
		rs.add(cancel)
		// A refusal of the credentials or TLS, which pick reports, comes
		// back from the round itself.
		n, _ := c.pick(ctx)
		go func() {
			defer rs.wg.Done()
			defer cancel()
			defer stop()
			began := time.Now()
			g, granted, err := c.waitRound(rctx, n, q, wait)
			early := err == nil && !granted && time.Since(began) < wait-wait/10
			r := roundResult{id: id, n: n, g: g, granted: granted, early: early, err: err}
			select {
			case results <- r:
			case <-done:
				rs.late(r)
			}
		}()
		return true
	}
	giveUp := func(err error) (grant, error) {
		rs.cutOff()
		rs.end()
		c.releaseLater(q)
		return grant{}, err
	}
	// settle waits, for at most bound, for the rounds still in flight to
	// come back, so that none reaches the server after the caller, given
	// the grant, releases it.
	settle := func(bound time.Duration) {
		t := time.NewTimer(bound)
		defer t.Stop()
		for inFlight > 0 {
			select {
			case r := <-results:
				inFlight--
				rs.late(r)
			case <-t.C:
				return
			}
		}
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
			inFlight--
			if r.err == nil && r.granted {
				rs.win(r.g.token)
				settle(min(c.cfg.requestTimeout, round/2))
				g := r.g
				g.rounds = rs
				return g, nil
			}
			rs.late(r)
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
