package bench

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// maxPermits is fencerd's limit on a semaphore's permits (server.MaxPermits).
const maxPermits = 1024

var (
	argRLock      = []byte("FENCE.RLOCK")
	argSemAcquire = []byte("FENCE.SEMACQUIRE")
)

// errBadSlot marks a permit outside its semaphore's slots.
var errBadSlot = errors.New("bench: a permit's slot is outside 0..permits-1")

// AcquireShared sends FENCE.RLOCK key owner ttl [WAIT wait], or, if permits
// is positive, FENCE.SEMACQUIRE key owner ttl permits [WAIT wait]. It
// returns the token, or 0 for a null reply, and a permit's slot (0 for a
// read lock).
func (c *conn) AcquireShared(key string, owner []byte, ttl time.Duration, permits int, wait time.Duration, deadline time.Time) (token uint64, slot int64, err error) {
	var ttlDigits, permitDigits, waitDigits [20]byte
	c.key = append(c.key[:0], key...)
	args := [7][]byte{argRLock, c.key, owner, strconv.AppendInt(ttlDigits[:0], ttl.Milliseconds(), 10)}
	n := 4
	if permits > 0 {
		args[0] = argSemAcquire
		args[n] = strconv.AppendInt(permitDigits[:0], int64(permits), 10)
		n++
	}
	if wait > 0 {
		args[n], args[n+1] = argWait, strconv.AppendInt(waitDigits[:0], max(wait.Milliseconds(), 1), 10)
		n += 2
	}
	c.buf = resp.AppendCommand(c.buf[:0], args[:n]...)
	r, err := c.roundTrip(deadline)
	if err != nil {
		return 0, 0, err
	}
	if r.IsNull {
		return 0, 0, nil
	}
	e := r.Elems
	if r.Kind == resp.Array && permits > 0 && len(e) == 3 && e[0].Kind == resp.Integer {
		slot, e = e[0].Int, e[1:]
	}
	if r.Kind == resp.Array && len(e) == 2 && (permits == 0 || len(r.Elems) == 3) && e[0].Kind == resp.Integer && e[0].Int > 0 {
		return uint64(e[0].Int), slot, nil
	}
	return 0, 0, fmt.Errorf("%w: %s answered %s", errProtocol, args[0], describe(r))
}

// sharedClient is one client goroutine of ReadShared or Semaphore: acquire
// the next name in turn, check, release, until the end. A client's tokens
// increase (each grant is a later entry than its last); a semaphore's
// holders never outnumber its permits, and their slots lie within them.
func (w *workload) sharedClient(id int, conns []*conn, mu *sync.Mutex, stopped *atomic.Bool, st *clientStats) {
	cfg := w.cfg
	permits := 0
	var wait time.Duration
	if cfg.Workload == Semaphore {
		permits = cfg.Permits
		if permits < cfg.Clients {
			wait = max(cfg.OpTimeout-100*time.Millisecond, time.Millisecond)
		}
	}
	owner := []byte(w.prefix + "-" + strconv.Itoa(id) + "-")
	ownerLen := len(owner)
	st.acq = make(Latencies, 0, 4096)
	st.rel = make(Latencies, 0, 4096)
	c := conns[id]
	redial := w.redialer(id, conns, mu, stopped, &c)
	// Clients start at different names, so that they spread over them.
	for seq := uint64(id); ; seq++ {
		if stopped.Load() || !time.Now().Before(w.end) {
			return
		}
		k := int(seq % uint64(len(w.shared)))
		name, ks := w.shared[k], &w.keys[k]
		owner = strconv.AppendUint(owner[:ownerLen], seq, 10)

		t0 := time.Now()
		tok, slot, err := c.AcquireShared(name, owner, cfg.TTL, permits, wait, minTime(t0.Add(cfg.OpTimeout), w.end))
		t1 := time.Now()
		measured := !t0.Before(w.measureStart)
		if err == nil && tok == 0 {
			err = errGaveUp
		}
		if err != nil {
			if stopped.Load() || !t1.Before(w.end) {
				return
			}
			st.fail(fmt.Errorf("acquire %s: %w", name, err), measured)
			if _, server := err.(ServerError); !server && !errors.Is(err, errGaveUp) {
				if !redial() {
					time.Sleep(10 * time.Millisecond)
				}
			}
			continue
		}
		if tok <= st.lastToken {
			st.regressions++
		}
		st.lastToken = tok
		if permits > 0 {
			if n := ks.holders.Add(1); n > int32(permits) || slot < 0 || slot >= int64(permits) {
				st.overlaps++
				if st.firstErr == nil && slot >= int64(permits) {
					st.firstErr = fmt.Errorf("%s: slot %d: %w", name, slot, errBadSlot)
				}
			}
			ks.holders.Add(-1)
		}

		if w.release(c, name, owner, t0, t1, measured, stopped, redial, st) {
			return
		}
	}
}
