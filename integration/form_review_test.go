package integration

import (
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Adversarial review of cluster formation (branch deploy-review; the
// findings are in /work/notes-deploy-review.md). These tests show ways the
// invariants of docs/safety.md, "Clusters that form themselves", fail: each
// fails on deploy 2eb1653.

// gateProxy is a TCP proxy that can be closed and opened again: a
// partition of one network path (one node's view of another's port), which
// loopback cannot make on demand. While blocked it closes every connection
// it accepts and every one it carries.
type gateProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	blocked bool
	conns   []net.Conn
}

func newGateProxy(t *testing.T, target string, blocked bool) *gateProxy {
	t.Helper()
	return newGateProxyAt(t, "127.0.0.1:0", target, blocked)
}

// newGateProxyAt is newGateProxy listening on listen.
func newGateProxyAt(t *testing.T, listen, target string, blocked bool) *gateProxy {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	p := &gateProxy{ln: ln, target: target, blocked: blocked}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.block() })
	return p
}

func (p *gateProxy) addr() string { return p.ln.Addr().String() }

func (p *gateProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		blocked := p.blocked
		p.mu.Unlock()
		if blocked {
			c.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.blocked {
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); s.Close() }()
		go func() { _, _ = io.Copy(c, s); c.Close() }()
	}
}

// block cuts the path: open connections are closed, new ones refused.
func (p *gateProxy) block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// open heals the path.
func (p *gateProxy) open() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = false
}

// formingReport asks addr for FENCE.FORMING and returns its fields by key
// (members as []any of [id, raft, client, removed]); nil if it did not
// answer.
func formingReport(addr string) map[string]any {
	v, err := clusterCall(addr, requestTimeout, "FENCE.FORMING")
	if err != nil {
		return nil
	}
	a, _ := v.([]any)
	m := map[string]any{}
	for i := 0; i+1 < len(a); i += 2 {
		k, _ := a[i].(string)
		m[k] = a[i+1]
	}
	return m
}

// recordedClientAddr returns the client address the report's configuration
// records for id, and whether the configuration names id.
func recordedClientAddr(rep map[string]any, id string) (string, bool) {
	ms, _ := rep["members"].([]any)
	for _, row := range ms {
		f, _ := row.([]any)
		if len(f) >= 3 && f[0] == id {
			s, _ := f[2].(string)
			return s, true
		}
	}
	return "", false
}

// awaitLog waits until d's log holds s, for at most within.
func awaitLog(t *testing.T, d *daemon, s string, within time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if strings.Contains(d.log(t), s) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// R1 (the window is not one round trip). A member whose address cannot be
// recorded (its client-port path to the leader is cut: the "client-port
// partition" docs/operations.md names) runs as a full member for as long
// as that lasts: it takes the log and acknowledges grants. Here it is the
// only follower to acknowledge a grant; it then loses its disk, comes back
// under its --id (as a StatefulSet pod does) once the path healed, and
// rule 3 (the leader names it without a recorded address) opens its vote
// gate: a member that acknowledged a committed grant votes with an empty
// log. docs/safety.md says the window is "about one round trip"; here it
// is as long as the partition, and recordAddress then waits 30 s
// (recordBackoff) between rounds.
func TestReviewUnrecordedMemberVotesAfterDiskLoss(t *testing.T) {
	ds := newDaemons(t, 3)
	ids := []string{"n1", "n2", "n3"}
	raftListen := func(d *daemon) string {
		for i, a := range d.args {
			if a == "--raft-listen" {
				return d.args[i+1]
			}
		}
		t.Fatal("no --raft-listen")
		return ""
	}
	// n1's and n2's advertised client addresses (what the cluster records,
	// what n3 and forwarding dial): proxies P1, P2. n3's --join paths to
	// n1 and n2: proxies J1, J2, cut at first. n3's Raft address: proxy
	// RP3, cut at first (no leader reaches n3 before its client paths are
	// cut, so it records nothing).
	p1 := newGateProxy(t, ds[0].addr, false)
	p2 := newGateProxy(t, ds[1].addr, false)
	j1 := newGateProxy(t, ds[0].addr, true)
	j2 := newGateProxy(t, ds[1].addr, true)
	rp3 := newGateProxy(t, raftListen(ds[2]), true)
	full := strings.Join([]string{ds[0].addr, ds[1].addr, ds[2].addr}, ",")
	ds[0].args = append(ds[0].args, "--bootstrap-expect", "3", "--join", full, "--id", ids[0], "--advertise", p1.addr())
	ds[1].args = append(ds[1].args, "--bootstrap-expect", "3", "--join", full, "--id", ids[1], "--advertise", p2.addr())
	ds[2].args = append(ds[2].args, "--bootstrap-expect", "3", "--join", strings.Join([]string{j1.addr(), j2.addr(), ds[2].addr}, ","),
		"--id", ids[2], "--raft-advertise", rp3.addr())
	for _, d := range ds {
		d.start(t)
	}
	n3 := ds[2]

	// n1 and n2 bootstrap {n1, n2, n3} (they reached n3 without state) and
	// elect a leader; n3 reaches nobody and waits, its gate shut.
	leader := -1
	deadline := time.Now().Add(clusterReadyTimeout)
	for leader < 0 {
		for i := range 2 {
			if r := formingReport(ds[i].addr); r != nil && r["leader"] == int64(1) && r["cluster_id"] != "" {
				leader = i
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("n1 and n2 elected no leader: %s\n%s", lastLine(ds[0].log(t)), lastLine(ds[1].log(t)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	other := 1 - leader
	if strings.Contains(n3.log(t), "this node may vote now") {
		t.Fatalf("n3 opened its gate before it reached anyone: %s", n3.log(t))
	}

	// n3's client paths heal: the leader names it without a recorded
	// address (it never ran), and it opens its gate (rule 3). No leader
	// has reached its Raft yet.
	j1.open()
	j2.open()
	if !awaitLog(t, n3, "this node may vote now", 20*time.Second) {
		t.Fatalf("n3 did not open its gate: %s", n3.log(t))
	}
	// Its client paths to n1 and n2 are cut again (a client-port
	// partition), then its Raft port is reached: it becomes a follower.
	j1.block()
	j2.block()
	p1.block()
	p2.block()
	rp3.open()
	lrep := formingReport(ds[leader].addr)
	want, _ := lrep["last_index"].(int64)
	deadline = time.Now().Add(20 * time.Second)
	for {
		r := formingReport(n3.addr)
		if got, _ := r["last_index"].(int64); got >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n3 did not catch up to index %d: %v", want, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	caughtUp := time.Now()
	if !awaitLog(t, n3, "join attempt failed", 10*time.Second) {
		t.Fatalf("n3 did not try to record its address: %s", n3.log(t))
	}

	// n3 runs as a follower for a while (grants go on), its address still
	// unrecorded: the window is as long as the partition.
	for time.Since(caughtUp) < 5*time.Second {
		if _, err := clusterCall(ds[leader].addr, requestTimeout, "FENCE.ACQUIRE", "while-unrecorded", "o", "1000"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The other follower stops: every grant now needs n3's acknowledgement.
	if err := ds[other].proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := ds[other].proc
	t.Cleanup(func() { _ = stopped.cmd.Process.Signal(syscall.SIGCONT) })
	var token int64
	deadline = time.Now().Add(20 * time.Second)
	for token == 0 {
		v, err := clusterCall(ds[leader].addr, requestTimeout, "FENCE.ACQUIRE", "acked-by-n3", "o1", "60000")
		if a, ok := v.([]any); err == nil && ok && len(a) >= 1 {
			token, _ = a[0].(int64)
		} else if time.Now().After(deadline) {
			t.Fatalf("no grant with n%d stopped: %#v %v", other+1, v, err)
		} else {
			time.Sleep(200 * time.Millisecond)
		}
	}
	lrep = formingReport(ds[leader].addr)
	if addr, named := recordedClientAddr(lrep, "n3"); !named || addr != "" {
		t.Fatalf("precondition: the leader records n3 at %q (named %v); want unrecorded", addr, named)
	}
	ranFor := time.Since(caughtUp).Round(100 * time.Millisecond)
	t.Logf("grant %d committed with n3 as the only follower to acknowledge it; n3 has run as a follower for %v without a recorded address", token, ranFor)
	if err := stopped.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	// n3 loses its disk; the network heals; it starts again, as before.
	n3.kill9(t)
	if err := os.RemoveAll(n3.dataDir); err != nil {
		t.Fatal(err)
	}
	j1.open()
	j2.open()
	p1.open()
	p2.open()
	n3.ready = func(*daemon) error { return nil }
	n3.start(t)
	if awaitLog(t, n3, "this node may vote now", 20*time.Second) {
		t.Fatalf("n3 acknowledged grant %d (the only follower to), ran %v without a recorded address, lost its state, and opened its vote gate (an empty log that votes): %s",
			token, ranFor, grepLines(n3.log(t), "forming"))
	}
	t.Logf("n3 without its state did not open its gate: %s", lastLine(n3.log(t)))
}

// grepLines returns the lines of log that hold s.
func grepLines(log, s string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return fmt.Sprint(strings.Join(out, "\n"))
}

// argValue returns the value that follows flag in args.
func argValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	t.Fatalf("no %s in %v", flag, args)
	return ""
}

// R2 (a Raft address that reaches another member). Raft counts a vote, and
// an acknowledgement, as the configured server's whoever answers at its
// address (raft.go: voteResult.voterID is the target's ID, never the
// answer's): nothing checks the answering node's ID. A Raft address given
// as a name (--raft-advertise fencer-2.fencer..., resolved at every dial,
// server/stream.go) reaches another member while the name still resolves
// to an IP that member now has (a rescheduled pod given the old IP of one
// that is down, before the DNS record changes; every pod has the same Raft
// port). Here, in a cluster of 5, a grant commits on L, V and A while X
// and M are down; L and V go down; M comes back reachable at its own
// address and at V's (loopback cannot re-point a name, so M listens on V's
// port and a proxy keeps its own). X asks M twice (as M and as V) and
// leads with 3 "votes" of 5 from 2 servers, neither with the grant; A, the
// only live server with it, follows X and loses it.
func TestReviewAddressReachingAnotherMemberCountsTwice(t *testing.T) {
	ids := []string{"n1", "n2", "n3", "n4", "n5"}
	ds, _ := formingDaemons(t, 5, 5, ids...)
	for _, d := range ds {
		d.start(t)
	}
	c := &nodeCluster{nodes: ds, ids: make([]string, len(ds))}
	c.formed(t, c.all(), c.all())
	l := c.leader(t)
	x, m, v, a := (l+1)%5, (l+2)%5, (l+3)%5, (l+4)%5
	ds[x].terminate(t)
	ds[m].terminate(t)
	g := c.mustGrant(t, l, clusterRetryWithin, "acked", "o1", time.Minute)
	t.Logf("grant %d committed on n%d, n%d and n%d; n%d and n%d were down", g.token, l+1, v+1, a+1, x+1, m+1)
	// A pauses (SIGSTOP) a moment: otherwise, campaigning since L and V
	// went down, it would win first with X's and M's votes.
	if err := ds[a].proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := ds[a].proc
	t.Cleanup(func() { _ = paused.cmd.Process.Signal(syscall.SIGCONT) })
	ds[l].kill9(t)
	ds[v].kill9(t)
	// M starts with its state, its Raft listener where the configuration
	// names V, and a proxy where it names M; it advertises its own address.
	own := argValue(t, ds[m].args, "--raft-listen")
	vAddr := argValue(t, ds[v].args, "--raft-listen")
	ds[m].args = append(ds[m].args, "--raft-advertise", own)
	ds[m].args[slices.Index(ds[m].args, "--raft-listen")+1] = vAddr
	newGateProxyAt(t, own, vAddr, false)
	ds[m].start(t)
	ds[x].start(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r := formingReport(ds[x].addr); r != nil && r["leader"] == int64(1) {
			t.Logf("n%d leads, confirmed by a quorum, with only n%d alive beside it (and A paused)", x+1, m+1)
			break
		}
		if time.Now().After(deadline) {
			t.Logf("n%d did not lead: %s", x+1, grepLines(ds[x].log(t), "vote"))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		st, err := clusterCall(ds[a].addr, requestTimeout, "FENCE.STATUS", "acked")
		last = fmt.Sprintf("%#v %v", st, err)
		if arr, ok := st.([]any); ok && len(arr) >= 1 && arr[0] != "o1" || st == nil && err == nil {
			leader, _ := clusterCall(ds[a].addr, requestTimeout, "FENCE.LEADER")
			ng, _ := clusterCall(ds[a].addr, requestTimeout, "FENCE.ACQUIRE", "acked", "o2", "60000")
			t.Fatalf("grant %d (o1, 60 s) is gone: n%d, which had it, follows leader %v elected by n%d and n%d (counted as n%d too), neither of which had it: FENCE.STATUS %s; o2's FENCE.ACQUIRE %#v",
				g.token, a+1, leader, x+1, m+1, v+1, last, ng)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("grant %d kept: %s", g.token, last)
}
