//go:build linux

package chaos

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clientTimeout is how long a client waits for a reply before it calls the
// outcome unknown: the server's own request timeout, plus a margin for a
// forwarded request and a loaded machine.
const clientTimeout = serverRequestTimeout + 3*time.Second

// clock timestamps the events of one run: nanoseconds since its start, on
// the monotonic clock that fencerd's lease timers also use.
type clock struct{ start time.Time }

func (c clock) now() int64 { return int64(time.Since(c.start)) }

// grant is one lock grant a client received (an ACQUIRE answered with a
// token), with what the client did with it afterwards.
type grant struct {
	workload   string
	key, owner string
	token      uint64
	ttl        time.Duration
	call, ret  int64 // when the ACQUIRE was sent and answered
	// validUntil is call+ttl, or later if an EXTEND was acknowledged: the
	// server must not free the lock before it.
	validUntil int64
	// released is when the client first sent a RELEASE for it that may
	// have taken effect; zero (math.MaxInt64 once logged) if it never did.
	released int64
}

// grantLog collects the grants of every workload.
type grantLog struct {
	mu     sync.Mutex
	grants []grant
}

func (l *grantLog) add(g grant) {
	if g.released == 0 {
		g.released = math.MaxInt64
	}
	l.mu.Lock()
	l.grants = append(l.grants, g)
	l.mu.Unlock()
}

func (l *grantLog) all() []grant {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]grant(nil), l.grants...)
}

// counters are the client-side figures of a run.
type counters struct {
	ops, okOps, failedOps, unknownOps atomic.Int64
	// unexpected counts replies of the wrong shape for their command (a
	// protocol bug); sample keeps the first.
	unexpected atomic.Int64
	sample     atomic.Value
}

// odd records a reply that does not fit its command.
func (c *counters) odd(cmd string, v any) {
	if c.unexpected.Add(1) == 1 {
		c.sample.Store(fmt.Sprintf("%s answered %#v", cmd, v))
	}
}

// tally counts one operation of a client library (redsync, the Go client),
// failed if err is not nil, and reports whether it succeeded.
func (c *counters) tally(err error) bool {
	c.ops.Add(1)
	if err != nil {
		c.failedOps.Add(1)
		return false
	}
	c.okOps.Add(1)
	return true
}

// client is one workload client bound to one node. It runs in its own
// goroutine; everything in it is used by that goroutine only.
type client struct {
	id    int
	name  string // unique, prefixes owners
	node  int
	conn  respConn
	rng   *rand.Rand
	clk   clock
	count *counters
	seq   int
}

func newClient(id, node int, c *cluster, clk clock, seed uint64, count *counters) *client {
	cl := &client{
		id: id, name: "c" + strconv.Itoa(id), node: node, clk: clk, count: count,
		rng: rand.New(rand.NewPCG(seed, uint64(id))),
	}
	addr := c.nodes[node].addr()
	cl.conn.dial = func() (net.Conn, error) { return c.nw.dial(addr, time.Second) }
	return cl
}

// crowd starts the workload clients of a run, each in a goroutine of its
// own, and waits for them once stop is closed.
type crowd struct {
	c     *cluster
	clk   clock
	seed  uint64
	count *counters
	// stop ends the workloads when the caller closes it.
	stop chan struct{}
	wg   sync.WaitGroup
	next int // the next client's ID
}

func newCrowd(c *cluster, clk clock, seed uint64, count *counters) *crowd {
	return &crowd{c: c, clk: clk, seed: seed, count: count, stop: make(chan struct{})}
}

// add returns a new client of node, for the caller to run.
func (cr *crowd) add(node int) *client {
	cl := newClient(cr.next, node, cr.c, cr.clk, cr.seed, cr.count)
	cr.next++
	return cl
}

// spawn runs f with a new client of node, and closes its connection when f
// returns.
func (cr *crowd) spawn(node int, f func(cl *client)) {
	cl := cr.add(node)
	cr.wg.Go(func() {
		defer cl.conn.close()
		f(cl)
	})
}

// wait fails the test unless every client returns within drainTimeout of
// stop being closed.
func (cr *crowd) wait(t *testing.T) {
	t.Helper()
	if !waitTimeout(&cr.wg, drainTimeout) {
		t.Fatalf("clients did not finish within %v of being stopped", drainTimeout)
	}
}

// owner returns a fresh owner name: every acquire attempt has its own, so
// that a remembered release never refuses a later attempt.
func (cl *client) owner() string {
	cl.seq++
	return fmt.Sprintf("%s-%d", cl.name, cl.seq)
}

// do sends one command and times it.
func (cl *client) do(timeout time.Duration, args ...string) (reply any, out outcome, call, ret int64) {
	call = cl.clk.now()
	v, sent, err := cl.conn.do(timeout, args...)
	ret = cl.clk.now()
	out = classify(v, err, sent)
	cl.count.ops.Add(1)
	switch out {
	case ok:
		cl.count.okOps.Add(1)
	case failed:
		cl.count.failedOps.Add(1)
		if err != nil {
			// Nothing was sent (the node is down or unreachable):
			// do not spin.
			time.Sleep(100 * time.Millisecond)
		}
	case unknown:
		cl.count.unknownOps.Add(1)
	}
	return v, out, call, ret
}

// statusRead is one FENCE.STATUS a client sent and its answer, decoded.
type statusRead struct {
	owner     string
	token     uint64
	held      bool
	reply     any // as received, for messages
	call, ret int64
}

// status sends FENCE.STATUS key. read is false when the answer says nothing
// either way: an error reply, a lost connection, or a reply of the wrong
// shape (counted as odd).
func (cl *client) status(key string) (r statusRead, read bool) {
	var out outcome
	r.reply, out, r.call, r.ret = cl.do(clientTimeout, "FENCE.STATUS", key)
	if out != ok {
		return r, false
	}
	var err error
	if r.owner, r.token, r.held, err = asStatus(r.reply); err != nil {
		cl.count.odd("FENCE.STATUS", r.reply)
		return r, false
	}
	return r, true
}

// think pauses between operations, so that the clients load the cluster
// without saturating a small machine.
func (cl *client) think() {
	time.Sleep(time.Duration(5+cl.rng.IntN(30)) * time.Millisecond)
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// ms renders a duration as the millisecond argument of a command.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
