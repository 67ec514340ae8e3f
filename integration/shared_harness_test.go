package integration

import (
	"bufio"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Shared keys (issue 20) on real processes: the clients below speak RESP
// directly to a three-node cluster and behave as docs/protocol.md "Safe
// retries" says a client should. Each one keeps a record of what it held
// and when, from the reply that granted it to the moment it sent the
// release; the checks compare those records with each other, and
// FENCE.HOLDERS on the leader with the rules of the key's kind.

// shTTL is every lease's TTL: long beside the holds (milliseconds) and a
// leader failover (seconds), so that no lease runs out while its holder
// uses it, and a violation in the records is the server's.
const shTTL = 10 * time.Second

// shClient is one client: one connection at a time to one of the cluster's
// nodes, moving to the next after a lost connection. It is not safe for
// concurrent use; every goroutine has its own.
type shClient struct {
	name  string
	addrs []string
	next  int
	conn  net.Conn
	r     *bufio.Reader
	seq   int
}

// newShClient returns a client that tries the nodes' addresses from the
// first'th on.
func newShClient(t *testing.T, cl *nodeCluster, name string, first int) *shClient {
	t.Helper()
	c := &shClient{name: name, next: first}
	for _, d := range cl.nodes {
		c.addrs = append(c.addrs, d.addr)
	}
	t.Cleanup(c.close)
	return c
}

func (c *shClient) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

// owner returns a fresh owner value: one per lease attempt.
func (c *shClient) owner() string {
	c.seq++
	return c.name + "-" + strconv.Itoa(c.seq)
}

// once sends args on the current connection, dialling the next address if
// there is none, and reads one reply within timeout. A transport failure
// drops the connection.
func (c *shClient) once(timeout time.Duration, args []string) (any, error) {
	if c.conn == nil {
		addr := c.addrs[c.next%len(c.addrs)]
		c.next++
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return nil, err
		}
		c.conn, c.r = conn, bufio.NewReader(conn)
	}
	v, err := clusterRoundTrip(c.conn, c.r, timeout, args...)
	if err != nil {
		c.close()
	}
	return v, err
}

// shResent counts the attempts call made again after an unknown outcome,
// for the tests' logs: it shows that the failovers reached the clients.
var shResent atomic.Int64

// shCall is the outcome of a command sent until it had an answer.
type shCall struct {
	v       any
	first   time.Time // when the first attempt was sent
	retried bool      // an earlier attempt's outcome is unknown
}

// call sends the command that build returns for what is left of wait
// (zero: no WAIT) until the reply is neither UNCERTAIN, NOLEADER nor
// NOTLEADER and the connection held, re-sending with the same arguments
// but the wait's remainder, as docs/protocol.md "Safe retries" allows for
// the same owner. It gives up clusterRetryWithin past the wait.
func (c *shClient) call(wait time.Duration, build func(wait time.Duration) []string) (shCall, error) {
	r := shCall{first: time.Now()}
	waitEnd := r.first.Add(wait)
	deadline := waitEnd.Add(clusterRetryWithin)
	var last any
	var lastErr error
	for {
		left := time.Until(waitEnd)
		if left < time.Millisecond {
			left = 0
		}
		args := build(left)
		v, err := c.once(left+clusterServerTimeout+clusterHangMargin, args)
		if err == nil && !clusterRetryable(v) {
			r.v = v
			return r, nil
		}
		r.retried = true
		shResent.Add(1)
		last, lastErr = v, err
		if time.Now().After(deadline) {
			return r, fmt.Errorf("%s: %s: no answer within %v of the wait's end (last: %#v, %v)", c.name, strings.Join(args, " "), clusterRetryWithin, last, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// withWait appends WAIT ms to args when wait is positive.
func withWait(args []string, wait time.Duration) []string {
	if wait > 0 {
		return append(args, "WAIT", strconv.FormatInt(max(wait.Milliseconds(), 1), 10))
	}
	return args
}

// shHold is one lease as its client saw it.
type shHold struct {
	client, owner string
	key           string
	mode          string // "read", "write", "permit" or "lock"
	slot          int
	token         int64
	from          time.Time // the granting reply was read
	to            time.Time // the release was first sent, or the client's validity ended
}

func (h shHold) String() string {
	return fmt.Sprintf("%s %s %s slot %d token %d [%s, %s]", h.owner, h.mode, h.key, h.slot, h.token,
		h.from.Format("15:04:05.000"), h.to.Format("15:04:05.000"))
}

// shRecords collects every client's holds.
type shRecords struct {
	mu    sync.Mutex
	holds []shHold
}

func (r *shRecords) add(h shHold) {
	r.mu.Lock()
	r.holds = append(r.holds, h)
	r.mu.Unlock()
}

func (r *shRecords) all() []shHold {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]shHold(nil), r.holds...)
}

// shConflict reports whether two holds of one key may not overlap: a
// writer (or a plain lock) with anyone, and two permits of one slot.
func shConflict(a, b shHold) bool {
	if a.key != b.key {
		return false
	}
	if a.mode == "permit" || b.mode == "permit" {
		return a.mode == b.mode && a.slot == b.slot
	}
	return a.mode != "read" || b.mode != "read"
}

// shCheck checks the holds: two conflicting holds never overlap, and of
// two conflicting holds the later has the larger token; at no moment do
// more than permits holds of a semaphore overlap, and every slot lies in
// 0..permits-1. It returns the number of violations, each reported with
// errorf.
func shCheck(errorf func(string, ...any), holds []shHold, permits int) int {
	bad := 0
	for i, a := range holds {
		if a.mode == "permit" && (a.slot < 0 || a.slot >= permits) {
			errorf("slot outside 0..%d: %v", permits-1, a)
			bad++
		}
		for _, b := range holds[i+1:] {
			if !shConflict(a, b) {
				continue
			}
			switch {
			case a.from.Before(b.to) && b.from.Before(a.to):
				errorf("conflicting holds overlap: %v and %v", a, b)
				bad++
			case a.to.Before(b.from) && a.token >= b.token, b.to.Before(a.from) && b.token >= a.token:
				errorf("the later of two conflicting holds has the smaller token: %v and %v", a, b)
				bad++
			}
		}
	}
	// Permits held at once, per key: sweep over the holds' ends.
	type edge struct {
		at    time.Time
		delta int
	}
	byKey := make(map[string][]edge)
	for _, h := range holds {
		if h.mode == "permit" {
			byKey[h.key] = append(byKey[h.key], edge{h.from, 1}, edge{h.to, -1})
		}
	}
	for key, es := range byKey {
		// An end sorts before a start at the same instant: the holds are
		// half-open.
		sort.Slice(es, func(i, j int) bool {
			if es[i].at.Equal(es[j].at) {
				return es[i].delta < es[j].delta
			}
			return es[i].at.Before(es[j].at)
		})
		n, most := 0, 0
		for _, e := range es {
			n += e.delta
			most = max(most, n)
		}
		if most > permits {
			errorf("semaphore %s: %d holds overlapped, it has %d permits", key, most, permits)
			bad++
		}
	}
	return bad
}

// shHolding is one row of FENCE.HOLDERS.
type shHolding struct {
	owner       string
	token       int64
	remainingMS int64
	session     int64
	mode        string
	slot        int64
}

// parseHolders decodes a FENCE.HOLDERS reply.
func parseHolders(v any) ([]shHolding, error) {
	rows, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("FENCE.HOLDERS answered %#v, not an array", v)
	}
	var out []shHolding
	for _, r := range rows {
		f, ok := r.([]any)
		if !ok || len(f) != 6 {
			return nil, fmt.Errorf("FENCE.HOLDERS row %#v is not [owner, token, remaining, session, mode, slot]", r)
		}
		var h shHolding
		var oks [6]bool
		h.owner, oks[0] = f[0].(string)
		h.token, oks[1] = f[1].(int64)
		h.remainingMS, oks[2] = f[2].(int64)
		h.session, oks[3] = f[3].(int64)
		h.mode, oks[4] = f[4].(string)
		h.slot, oks[5] = f[5].(int64)
		for _, ok := range oks {
			if !ok {
				return nil, fmt.Errorf("FENCE.HOLDERS row %#v has a field of the wrong type", r)
			}
		}
		out = append(out, h)
	}
	return out, nil
}

// holders reads FENCE.HOLDERS key on node i, retrying transient errors.
func (c *nodeCluster) holders(t *testing.T, i int, key string) []shHolding {
	t.Helper()
	hs, err := parseHolders(c.callRetry(t, i, clusterRetryWithin, "FENCE.HOLDERS", key))
	if err != nil {
		t.Fatalf("node %d: %v", i+1, err)
	}
	return hs
}

// shHoldersOK checks one FENCE.HOLDERS reading of a key: a writer or a
// plain lock alone, at most permits permits on distinct slots within
// 0..permits-1, distinct tokens, one mode of key.
func shHoldersOK(key string, hs []shHolding, permits int) error {
	slots := make(map[int64]bool)
	tokens := make(map[int64]bool)
	for _, h := range hs {
		if (h.mode == "write" || h.mode == "lock") && len(hs) > 1 {
			return fmt.Errorf("%s: a %s holder with others: %+v", key, h.mode, hs)
		}
		if h.mode != hs[0].mode && (h.mode == "permit" || hs[0].mode == "permit") {
			return fmt.Errorf("%s: permits and other modes at once: %+v", key, hs)
		}
		if h.mode == "permit" {
			if h.slot < 0 || int(h.slot) >= permits || slots[h.slot] {
				return fmt.Errorf("%s: a permit on slot %d (permits %d, slots taken %v): %+v", key, h.slot, permits, slots, hs)
			}
			slots[h.slot] = true
		}
		if tokens[h.token] && h.mode != "lock" {
			return fmt.Errorf("%s: two holders with token %d: %+v", key, h.token, hs)
		}
		tokens[h.token] = true
	}
	if len(slots) > permits {
		return fmt.Errorf("%s: %d permits held, the semaphore has %d", key, len(slots), permits)
	}
	return nil
}

// killLeader kills the leader with SIGKILL and waits until the surviving
// nodes agree on a new one, whose index it returns.
func (c *nodeCluster) killLeader(t *testing.T) (dead, leader int) {
	t.Helper()
	dead = c.leader(t)
	oldID := c.ids[dead]
	killed := time.Now()
	resent := shResent.Load()
	c.nodes[dead].kill9(t)
	t.Cleanup(func() { t.Logf("the clients re-sent %d commands after the kill", shResent.Load()-resent) })
	c.awaitNewLeader(t, c.others(dead), oldID, killed, clusterElectionTimeout)
	leader = c.agreedLeader(t, c.others(dead), clusterReadyTimeout)
	t.Logf("killed the leader, node %d; node %d leads %v later", dead+1, leader+1, time.Since(killed).Round(time.Millisecond))
	return dead, leader
}

// acquire takes key in mode ("read", "write", "permit" of a semaphore of
// permits, or "lock", a plain lock) with a fresh owner, waiting up to wait.
// ok is false if the wait ended without a grant. An acquire whose outcome
// was unknown on the way and that ends without a grant is followed by a
// release by its owner, so that a grant the client never saw does not stay.
func (c *shClient) acquire(key, mode string, permits int, wait time.Duration) (h shHold, ok bool, err error) {
	owner := c.owner()
	ttl := strconv.FormatInt(shTTL.Milliseconds(), 10)
	build := func(w time.Duration) []string {
		switch mode {
		case "read":
			return withWait([]string{"FENCE.RLOCK", key, owner, ttl}, w)
		case "write":
			return withWait([]string{"FENCE.WLOCK", key, owner, ttl}, w)
		case "permit":
			return withWait([]string{"FENCE.SEMACQUIRE", key, owner, ttl, strconv.Itoa(permits)}, w)
		default:
			return withWait([]string{"FENCE.ACQUIRE", key, owner, ttl}, w)
		}
	}
	r, err := c.call(wait, build)
	if err != nil {
		return shHold{}, false, err
	}
	h = shHold{client: c.name, owner: owner, key: key, mode: mode, from: time.Now()}
	if r.v == nil {
		if r.retried {
			if _, err := c.call(0, func(time.Duration) []string { return []string{"FENCE.RELEASE", key, owner} }); err != nil {
				return shHold{}, false, err
			}
		}
		return shHold{}, false, nil
	}
	a, isArr := r.v.([]any)
	want := 2
	if mode == "permit" {
		want = 3
	}
	if !isArr || len(a) != want {
		return shHold{}, false, fmt.Errorf("%s: %s %s: reply %#v", c.name, mode, key, r.v)
	}
	if mode == "permit" {
		slot, isInt := a[0].(int64)
		if !isInt {
			return shHold{}, false, fmt.Errorf("%s: permit %s: reply %#v has no slot", c.name, key, r.v)
		}
		h.slot = int(slot)
		a = a[1:]
	}
	tok, ok1 := a[0].(int64)
	ms, ok2 := a[1].(int64)
	if !ok1 || !ok2 || tok <= 0 || ms != shTTL.Milliseconds() {
		return shHold{}, false, fmt.Errorf("%s: %s %s: reply %#v is not [token, %d]", c.name, mode, key, r.v, shTTL.Milliseconds())
	}
	h.token = tok
	// The client's validity: from before the first attempt, less a
	// tenth for clock drift, as the Go client counts it.
	h.to = r.first.Add(shTTL * 9 / 10)
	return h, true, nil
}

// acquireAll takes the plain locks keys all at once with FENCE.MACQUIRE
// and a fresh owner, waiting up to wait; one hold per key, one token.
func (c *shClient) acquireAll(keys []string, wait time.Duration) (hs []shHold, ok bool, err error) {
	owner := c.owner()
	ttl := strconv.FormatInt(shTTL.Milliseconds(), 10)
	r, err := c.call(wait, func(w time.Duration) []string {
		return withWait(append([]string{"FENCE.MACQUIRE", owner, ttl, strconv.Itoa(len(keys))}, keys...), w)
	})
	if err != nil {
		return nil, false, err
	}
	from := time.Now()
	if r.v == nil {
		if r.retried {
			if _, err := c.call(0, func(time.Duration) []string {
				return append([]string{"FENCE.MRELEASE", owner, strconv.Itoa(len(keys))}, keys...)
			}); err != nil {
				return nil, false, err
			}
		}
		return nil, false, nil
	}
	g, ok, err := parseGrantReply(r.v)
	if err != nil || !ok || g.ttlMS != shTTL.Milliseconds() {
		return nil, false, fmt.Errorf("%s: FENCE.MACQUIRE %v: reply %#v (%v)", c.name, keys, r.v, err)
	}
	for _, k := range keys {
		hs = append(hs, shHold{client: c.name, owner: owner, key: k, mode: "lock", token: g.token, from: from, to: r.first.Add(shTTL * 9 / 10)})
	}
	return hs, true, nil
}

// release releases hs, one hold or the holds of one FENCE.MACQUIRE, sets
// their ends to when the release was first sent (if their validity had
// not ended before) and adds them to rec. The server must answer that
// it released every one, except after an attempt of unknown outcome,
// which may have released them already.
func (c *shClient) release(rec *shRecords, hs ...shHold) error {
	now := time.Now()
	for i := range hs {
		if now.Before(hs[i].to) {
			hs[i].to = now
		}
		rec.add(hs[i])
	}
	h := hs[0]
	args := []string{"FENCE.RELEASE", h.key, h.owner}
	if len(hs) > 1 {
		args = []string{"FENCE.MRELEASE", h.owner, strconv.Itoa(len(hs))}
		for _, x := range hs {
			args = append(args, x.key)
		}
	}
	r, err := c.call(0, func(time.Duration) []string { return args })
	if err != nil {
		return err
	}
	n, isInt := r.v.(int64)
	if !isInt || (n != int64(len(hs)) && !r.retried) || n < 0 || n > int64(len(hs)) {
		return fmt.Errorf("%s: %s answered %#v (retried %v)", c.name, strings.Join(args, " "), r.v, r.retried)
	}
	return nil
}

// TestSharedCheckFindsViolations shows that shCheck and shHoldersOK see
// what the tests look for: overlapping writers, a writer with a reader, a
// slot held twice, a fourth permit, tokens out of order.
func TestSharedCheckFindsViolations(t *testing.T) {
	quiet := func(string, ...any) {}
	at := func(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }
	h := func(mode string, slot int, token int64, from, to int) shHold {
		return shHold{owner: fmt.Sprint("o", token), key: "k", mode: mode, slot: slot, token: token, from: at(from), to: at(to)}
	}
	for _, tt := range []struct {
		name  string
		holds []shHold
		bad   bool
	}{
		{"readers overlap", []shHold{h("read", 0, 1, 0, 10), h("read", 0, 2, 5, 15), h("write", 0, 3, 16, 20)}, false},
		{"writer with a reader", []shHold{h("read", 0, 1, 0, 10), h("write", 0, 2, 9, 15)}, true},
		{"writer after a reader, smaller token", []shHold{h("read", 0, 2, 0, 10), h("write", 0, 1, 11, 15)}, true},
		{"three permits", []shHold{h("permit", 0, 1, 0, 10), h("permit", 1, 2, 0, 10), h("permit", 2, 3, 0, 10), h("permit", 0, 4, 10, 20)}, false},
		{"a slot twice", []shHold{h("permit", 0, 1, 0, 10), h("permit", 0, 2, 5, 15)}, true},
		{"slot out of range", []shHold{h("permit", 3, 1, 0, 10)}, true},
		{"plain locks overlap", []shHold{h("lock", 0, 1, 0, 10), h("lock", 0, 2, 5, 15)}, true},
	} {
		if got := shCheck(quiet, tt.holds, 3) > 0; got != tt.bad {
			t.Errorf("%s: shCheck found violations: %v, want %v", tt.name, got, tt.bad)
		}
	}
	// Four permits on four slots overlap only if the slots are in range, so
	// the count is checked with a semaphore of 3 read as one of 4.
	four := []shHold{h("permit", 0, 1, 0, 10), h("permit", 1, 2, 0, 10), h("permit", 2, 3, 0, 10), h("permit", 3, 4, 0, 10)}
	if shCheck(quiet, four, 4) > 0 || shCheck(quiet, four, 3) == 0 {
		t.Error("shCheck does not count overlapping permits")
	}
	for _, tt := range []struct {
		hs  []shHolding
		bad bool
	}{
		{[]shHolding{{owner: "a", token: 1, mode: "read"}, {owner: "b", token: 2, mode: "read"}}, false},
		{[]shHolding{{owner: "a", token: 1, mode: "read"}, {owner: "b", token: 2, mode: "write"}}, true},
		{[]shHolding{{owner: "a", token: 1, mode: "permit", slot: 0}, {owner: "b", token: 2, mode: "permit", slot: 0}}, true},
		{[]shHolding{{owner: "a", token: 1, mode: "permit", slot: 3}}, true},
		{[]shHolding{{owner: "a", token: 1, mode: "read"}, {owner: "b", token: 1, mode: "read"}}, true},
	} {
		if got := shHoldersOK("k", tt.hs, 3) != nil; got != tt.bad {
			t.Errorf("shHoldersOK(%+v) failed: %v, want %v", tt.hs, got, tt.bad)
		}
	}
}
