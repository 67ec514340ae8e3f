package client

import (
	"context"
	"sync"
	"time"
)

// validity is the client-side validity of a lease or a session: from just
// before the request that granted or last renewed it was sent, for the TTL
// less the drift allowance, so that it ends before the server's. Its
// context ends, with the cause lost returns, when a timer finds it run out;
// a renewal moves the end.
type validity struct {
	ttl   time.Duration
	drift time.Duration // allowance subtracted from every validity

	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   func(until time.Time) error // the cause when it runs out

	vmu   sync.Mutex // guards sent, until and timer
	sent  time.Time  // before the last request that granted or renewed it
	until time.Time  // client-side validity end
	timer *time.Timer
}

// start begins the validity of a grant sent at sent, under parent.
func (v *validity) start(parent context.Context, ttl, drift time.Duration, sent time.Time, lost func(time.Time) error) {
	v.ttl, v.drift, v.lost = ttl, drift, lost
	v.ctx, v.cancel = context.WithCancelCause(parent)
	v.sent, v.until = sent, sent.Add(ttl-drift)
	v.timer = time.AfterFunc(time.Until(v.until), v.expire)
}

// validUntil returns the end of the validity.
func (v *validity) validUntil() time.Time {
	v.vmu.Lock()
	defer v.vmu.Unlock()
	return v.until
}

// renewed records a successful renewal sent at sent.
func (v *validity) renewed(sent time.Time) {
	v.vmu.Lock()
	defer v.vmu.Unlock()
	if v.ctx.Err() != nil || !sent.After(v.sent) {
		return
	}
	v.sent, v.until = sent, sent.Add(v.ttl-v.drift)
	v.timer.Reset(time.Until(v.until))
}

// expire runs when the validity timer fires.
func (v *validity) expire() {
	v.vmu.Lock()
	until := v.until
	if left := time.Until(until); left > 0 {
		// Renewed while the timer fired.
		v.timer.Reset(left)
		v.vmu.Unlock()
		return
	}
	v.vmu.Unlock()
	v.cancel(v.lost(until))
}

// stopTimer stops the validity timer.
func (v *validity) stopTimer() {
	if v.timer != nil {
		v.timer.Stop()
	}
}

// attemptTimeout bounds one renewal attempt. With other nodes to try, an
// attempt gets half the validity left (at least minRenewAttempt of it), so
// that a node that hangs leaves time for the next; with one node, a retry
// could only go to the same node, and a slow reply is still worth having,
// so it gets all of it.
func (v *validity) attemptTimeout(c *Client) time.Duration {
	left := time.Until(v.validUntil())
	if len(c.nodes) == 1 {
		return min(c.cfg.requestTimeout, left)
	}
	return min(c.cfg.requestTimeout, max(left/2, min(left, minRenewAttempt)))
}

// minRenewAttempt is the shortest timeout a renewal attempt gets while the
// validity has that much left.
const minRenewAttempt = 200 * time.Millisecond

// renewLoop calls renew about every TTL/3 until the validity ends, and
// closes done when it returns.
func (v *validity) renewLoop(renew func(context.Context) error, done chan struct{}) {
	defer close(done)
	for {
		v.vmu.Lock()
		next := v.sent.Add(v.ttl / 3)
		v.vmu.Unlock()
		if err := sleep(v.ctx, v.ctx, time.Until(next)); err != nil {
			return
		}
		if err := renew(v.ctx); err != nil {
			if v.ctx.Err() != nil {
				return
			}
			// No verdict, and still valid (an unexpected reply, say): the
			// timer ends it unless a later renewal succeeds.
			if err := sleep(v.ctx, v.ctx, jitter(4*minBackoff)); err != nil {
				return
			}
		}
	}
}
