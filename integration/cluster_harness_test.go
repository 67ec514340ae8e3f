package integration

import (
	"bufio"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// Cluster tests run three fencerd processes on loopback with Raft's default
// timeouts: an election takes one to three seconds. Every wait below is
// bounded, and its bound is at least twice what it takes on an idle machine.
const (
	// clusterReadyTimeout bounds forming (or re-forming) a cluster: joins,
	// elections, followers catching up on the log.
	clusterReadyTimeout = 30 * time.Second
	// clusterServerTimeout is fencerd's --request-timeout default: the
	// longest any single request may take (a WAIT gets its wait on top).
	clusterServerTimeout = 10 * time.Second
	// clusterHangMargin is how far past clusterServerTimeout a reply may come
	// before the test calls it a hang.
	clusterHangMargin = 5 * time.Second
	// clusterElectionTimeout bounds how long after a leader's death a new leader
	// must be visible.
	clusterElectionTimeout = 10 * time.Second
	// clusterRetryWithin bounds retrying a command that got UNCERTAIN, NOLEADER or
	// NOTLEADER around a leader change.
	clusterRetryWithin = 15 * time.Second
	// clusterPollEvery is the pause between polls of a cluster's state.
	clusterPollEvery = 50 * time.Millisecond
)

// nodeCluster is a set of fencerd processes that form one Raft cluster.
type nodeCluster struct {
	nodes []*daemon
	// ids holds each node's Raft ID, learned from FENCE.MEMBERS.
	ids []string
}

// startNodeCluster starts an n-node cluster: node 1 bootstraps, node i > 1 joins
// with --join naming the client addresses of nodes 1..i-1. It returns once
// every node lists all n members with client addresses and agrees on the
// leader. The processes are stopped when the test ends.
func startNodeCluster(t *testing.T, n int) *nodeCluster {
	t.Helper()
	return startNodeClusterWith(t, n, func(*daemon) {})
}

// startNodeClusterWith is startNodeCluster with each daemon changed by mod
// before it starts (its binary, environment or flags).
func startNodeClusterWith(t *testing.T, n int, mod func(*daemon)) *nodeCluster {
	t.Helper()
	c := &nodeCluster{nodes: newDaemons(t, n), ids: make([]string, n)}
	var joins []string
	for _, d := range c.nodes {
		if len(joins) > 0 {
			d.args = append(d.args, "--join", strings.Join(joins, ","))
		}
		joins = append(joins, d.addr)
		mod(d)
	}
	start := time.Now()
	for _, d := range c.nodes {
		d.start(t)
	}
	c.awaitMembers(t, c.all(), c.all(), clusterReadyTimeout)
	t.Logf("cluster of %d formed in %v; leader is node %d", n, time.Since(start).Round(time.Millisecond), c.leader(t)+1)
	return c
}

// all returns the indexes of every node.
func (c *nodeCluster) all() []int {
	out := make([]int, len(c.nodes))
	for i := range out {
		out[i] = i
	}
	return out
}

// others returns the indexes of every node except those in skip.
func (c *nodeCluster) others(skip ...int) []int {
	var out []int
	for i := range c.nodes {
		found := false
		for _, s := range skip {
			found = found || s == i
		}
		if !found {
			out = append(out, i)
		}
	}
	return out
}

// clusterMember is one row of FENCE.MEMBERS.
type clusterMember struct {
	id, raftAddr, clientAddr, role string
}

// parseClusterMembers decodes a FENCE.MEMBERS reply.
func parseClusterMembers(v any) ([]clusterMember, error) {
	rows, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("FENCE.MEMBERS answered %#v, not an array", v)
	}
	var out []clusterMember
	for _, r := range rows {
		f, ok := r.([]any)
		if !ok || len(f) != 4 {
			return nil, fmt.Errorf("FENCE.MEMBERS row %#v is not [id, raft, client, role]", r)
		}
		var s [4]string
		for i := range s {
			if s[i], ok = f[i].(string); !ok {
				return nil, fmt.Errorf("FENCE.MEMBERS row %#v holds a non-string", r)
			}
		}
		out = append(out, clusterMember{s[0], s[1], s[2], s[3]})
	}
	return out, nil
}

// parseClusterLeader decodes a FENCE.LEADER reply: empty strings for null.
func parseClusterLeader(v any) (id, addr string, err error) {
	if v == nil {
		return "", "", nil
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return "", "", fmt.Errorf("FENCE.LEADER answered %#v, not [id, addr]", v)
	}
	id, ok1 := a[0].(string)
	addr, ok2 := a[1].(string)
	if !ok1 || !ok2 {
		return "", "", fmt.Errorf("FENCE.LEADER answered %#v, not two strings", v)
	}
	return id, addr, nil
}

// membersState checks, once, that every node in ask lists exactly the nodes
// in want as members, each with its client address, with one leader that
// all of them name, in FENCE.MEMBERS and in FENCE.LEADER. It returns the
// leader's index, or a description of what is not there yet.
func (c *nodeCluster) membersState(ask, want []int) (int, string) {
	byAddr := make(map[string]int)
	for _, i := range want {
		byAddr[c.nodes[i].addr] = i
	}
	leader := -1
	for _, i := range ask {
		d := c.nodes[i]
		v, err := clusterCall(d.addr, 2*time.Second, "FENCE.MEMBERS")
		if err != nil {
			return -1, fmt.Sprintf("node %d: FENCE.MEMBERS: %v", i+1, err)
		}
		ms, err := parseClusterMembers(v)
		if err != nil {
			return -1, fmt.Sprintf("node %d: %v", i+1, err)
		}
		if len(ms) != len(want) {
			return -1, fmt.Sprintf("node %d lists %d members, want %d: %+v", i+1, len(ms), len(want), ms)
		}
		leaderID := ""
		for _, m := range ms {
			j, ok := byAddr[m.clientAddr]
			if !ok {
				return -1, fmt.Sprintf("node %d lists a member with client address %q: %+v", i+1, m.clientAddr, ms)
			}
			c.ids[j] = m.id
			if m.role == "leader" {
				if leaderID != "" {
					return -1, fmt.Sprintf("node %d lists two leaders: %+v", i+1, ms)
				}
				leaderID = m.id
				if leader >= 0 && leader != j {
					return -1, fmt.Sprintf("nodes disagree on the leader: node %d says node %d, another said node %d", i+1, j+1, leader+1)
				}
				leader = j
			} else if m.role != "follower" {
				return -1, fmt.Sprintf("node %d lists a member with role %q: %+v", i+1, m.role, ms)
			}
		}
		if leaderID == "" {
			return -1, fmt.Sprintf("node %d lists no leader: %+v", i+1, ms)
		}
		v, err = clusterCall(d.addr, 2*time.Second, "FENCE.LEADER")
		if err != nil {
			return -1, fmt.Sprintf("node %d: FENCE.LEADER: %v", i+1, err)
		}
		id, addr, err := parseClusterLeader(v)
		if err != nil {
			return -1, fmt.Sprintf("node %d: %v", i+1, err)
		}
		if id != leaderID || addr != c.nodes[leader].addr {
			return -1, fmt.Sprintf("node %d: FENCE.LEADER says [%q %q]; FENCE.MEMBERS says %q at %s", i+1, id, addr, leaderID, c.nodes[leader].addr)
		}
	}
	return leader, ""
}

// awaitMembers waits until membersState holds for ask and want, and returns
// the leader's index.
func (c *nodeCluster) awaitMembers(t *testing.T, ask, want []int, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		leader, missing := c.membersState(ask, want)
		if missing == "" {
			return leader
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not settle within %v: %s", within, missing)
		}
		time.Sleep(clusterPollEvery)
	}
}

// leader returns the index of the leader every running node names, waiting
// (within clusterReadyTimeout) until they agree.
func (c *nodeCluster) leader(t *testing.T) int {
	t.Helper()
	var running []int
	for i, d := range c.nodes {
		if d.proc != nil && !d.proc.done() {
			running = append(running, i)
		}
	}
	return c.agreedLeader(t, running, clusterReadyTimeout)
}

// agreedLeader waits until every node in ask names the same leader, one of
// the cluster's nodes, in FENCE.LEADER, and returns its index.
func (c *nodeCluster) agreedLeader(t *testing.T, ask []int, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		idx, why := c.leaderOnce(ask)
		if why == "" {
			return idx
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("nodes %v did not agree on a leader within %v: %s", clusterNodeNumbers(ask), within, last)
		}
		time.Sleep(clusterPollEvery)
	}
}

func (c *nodeCluster) leaderOnce(ask []int) (int, string) {
	idx := -1
	for _, i := range ask {
		v, err := clusterCall(c.nodes[i].addr, 2*time.Second, "FENCE.LEADER")
		if err != nil {
			return -1, fmt.Sprintf("node %d: %v", i+1, err)
		}
		id, addr, err := parseClusterLeader(v)
		if err != nil {
			return -1, err.Error()
		}
		j := c.indexOf(id)
		if j < 0 {
			return -1, fmt.Sprintf("node %d names leader %q", i+1, id)
		}
		if addr != c.nodes[j].addr {
			return -1, fmt.Sprintf("node %d names leader %s at %q, want %s", i+1, id, addr, c.nodes[j].addr)
		}
		if idx >= 0 && idx != j {
			return -1, fmt.Sprintf("node %d names node %d, another names node %d", i+1, j+1, idx+1)
		}
		idx = j
	}
	return idx, ""
}

// indexOf returns the index of the node with Raft ID id, or -1.
func (c *nodeCluster) indexOf(id string) int {
	for i, x := range c.ids {
		if id != "" && x == id {
			return i
		}
	}
	return -1
}

// awaitNewLeader polls FENCE.LEADER on the nodes in ask until one of them
// names a leader other than oldID, and returns that leader's index and when
// it was first seen. It fails the test if that takes longer than within,
// counted from since.
func (c *nodeCluster) awaitNewLeader(t *testing.T, ask []int, oldID string, since time.Time, within time.Duration) (int, time.Time) {
	t.Helper()
	for {
		for _, i := range ask {
			v, err := clusterCall(c.nodes[i].addr, 2*time.Second, "FENCE.LEADER")
			seen := time.Now()
			if err != nil {
				t.Fatalf("node %d: FENCE.LEADER: %v", i+1, err)
			}
			id, _, err := parseClusterLeader(v)
			if err != nil {
				t.Fatal(err)
			}
			if id != "" && id != oldID {
				j := c.indexOf(id)
				if j < 0 {
					t.Fatalf("node %d names an unknown leader %q", i+1, id)
				}
				return j, seen
			}
		}
		if time.Since(since) > within {
			t.Fatalf("no new leader visible on nodes %v within %v of the old one's death", clusterNodeNumbers(ask), within)
		}
		time.Sleep(clusterPollEvery)
	}
}

// clusterNodeNumbers turns indexes into the node numbers the logs use.
func clusterNodeNumbers(idx []int) []int {
	out := make([]int, len(idx))
	for i, x := range idx {
		out[i] = x + 1
	}
	sort.Ints(out)
	return out
}

// testHosts maps host names that only the nodes resolve (containers'
// /etc/hosts, image_test.go) to the addresses the test dials them at.
var testHosts sync.Map

// testHostAddr returns addr with its host replaced as testHosts says.
func testHostAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip, ok := testHosts.Load(host); ok {
		return net.JoinHostPort(ip.(string), port)
	}
	return addr
}

// clusterCall dials addr, sends one command and reads one reply, all within
// timeout. The reply is as respConn.do returns it (an error reply is a
// respError value, not an error); err is a transport failure.
func clusterCall(addr string, timeout time.Duration, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", testHostAddr(addr), timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return clusterRoundTrip(conn, bufio.NewReader(conn), timeout, args...)
}

// clusterRoundTrip sends args on conn and reads one reply within timeout.
func clusterRoundTrip(conn net.Conn, r *bufio.Reader, timeout time.Duration, args ...string) (any, error) {
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	if _, err := conn.Write(resp.Command(args...)); err != nil {
		return nil, err
	}
	return resp.ReadPlain(r)
}

// clusterRetryPrefixes start the error replies that mean "the outcome is
// unknown or no leader could be used: try again".
var clusterRetryPrefixes = []string{"UNCERTAIN", "NOLEADER", "NOTLEADER"}

// clusterRetryable reports whether v is an error reply to retry around a leader
// change.
func clusterRetryable(v any) bool {
	e, ok := v.(respError)
	if !ok {
		return false
	}
	for _, p := range clusterRetryPrefixes {
		if strings.HasPrefix(string(e), p+" ") {
			return true
		}
	}
	return false
}

// callRetry sends args to node i until the reply is not retryable, for at
// most within, and returns that reply. A transport failure (the node is
// supposed to be up) or running out of time fails the test.
func (c *nodeCluster) callRetry(t *testing.T, i int, within time.Duration, args ...string) any {
	t.Helper()
	deadline := time.Now().Add(within)
	tries := 0
	for {
		tries++
		v, err := clusterCall(c.nodes[i].addr, requestTimeout, args...)
		if err != nil {
			t.Fatalf("node %d: %s: %v", i+1, strings.Join(args, " "), err)
		}
		if !clusterRetryable(v) {
			if tries > 1 {
				t.Logf("node %d: %s answered after %d tries", i+1, strings.Join(args, " "), tries)
			}
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: %s still answered %q after %v (%d tries)", i+1, strings.Join(args, " "), v, within, tries)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// parseGrantReply decodes a FENCE.ACQUIRE reply: ok false for null; an error for
// anything else that is not [token, ttl].
func parseGrantReply(v any) (g grant, ok bool, err error) {
	if v == nil {
		return grant{}, false, nil
	}
	a, isArr := v.([]any)
	if !isArr || len(a) != 2 {
		return grant{}, false, fmt.Errorf("reply %#v is not [token, ttl]", v)
	}
	tok, ok1 := a[0].(int64)
	ms, ok2 := a[1].(int64)
	if !ok1 || !ok2 || tok <= 0 {
		return grant{}, false, fmt.Errorf("reply %#v is not two integers with a positive token", v)
	}
	return grant{token: tok, ttlMS: ms}, true, nil
}

// mustGrant sends FENCE.ACQUIRE key owner ttl to node i, retrying transient
// errors for up to within, and fails the test unless the lock is granted.
func (c *nodeCluster) mustGrant(t *testing.T, i int, within time.Duration, key, owner string, ttl time.Duration) grant {
	t.Helper()
	v := c.callRetry(t, i, within, "FENCE.ACQUIRE", key, owner, fmt.Sprint(ttl.Milliseconds()))
	g, ok, err := parseGrantReply(v)
	if err != nil || !ok {
		t.Fatalf("node %d: FENCE.ACQUIRE %s %s: want a grant, got %#v (%v)", i+1, key, owner, v, err)
	}
	return g
}

// statusOf sends FENCE.STATUS key to node i (retrying transient errors) and
// returns the lock's state; held is false for null.
func (c *nodeCluster) statusOf(t *testing.T, i int, within time.Duration, key string) (s lockStatus, held bool) {
	t.Helper()
	v := c.callRetry(t, i, within, "FENCE.STATUS", key)
	if v == nil {
		return lockStatus{}, false
	}
	a, ok := v.([]any)
	if !ok || len(a) != 3 {
		t.Fatalf("node %d: FENCE.STATUS %s answered %#v, not [owner, token, remaining]", i+1, key, v)
	}
	s.owner, _ = a[0].(string)
	s.token, _ = a[1].(int64)
	s.remainingMS, _ = a[2].(int64)
	return s, true
}

// transfer sends FENCE.TRANSFER <id of node to> to node via and waits until
// every running node names node to as the leader. After an UNCERTAIN (or
// other transient) reply it checks whether leadership moved before it asks
// again: a second transfer would reach the new leader and fail.
func (c *nodeCluster) transfer(t *testing.T, via, to int) {
	t.Helper()
	deadline := time.Now().Add(clusterRetryWithin)
	for {
		v, err := clusterCall(c.nodes[via].addr, requestTimeout, "FENCE.TRANSFER", c.ids[to])
		if err != nil {
			t.Fatalf("node %d: FENCE.TRANSFER: %v", via+1, err)
		}
		if v == "OK" {
			break
		}
		if !clusterRetryable(v) {
			t.Fatalf("node %d: FENCE.TRANSFER to node %d answered %#v", via+1, to+1, v)
		}
		if idx, why := c.leaderOnce([]int{via}); why == "" && idx == to {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: FENCE.TRANSFER to node %d still answered %q after %v", via+1, to+1, v, clusterRetryWithin)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := c.leader(t); got != to {
		t.Fatalf("after FENCE.TRANSFER to node %d, the nodes name node %d", to+1, got+1)
	}
}

// remove sends FENCE.REMOVE <id of node gone> to node via until it answers
// OK. After a transient reply, a later "no such member" means the earlier
// attempt did it.
func (c *nodeCluster) remove(t *testing.T, via, gone int) {
	t.Helper()
	deadline := time.Now().Add(clusterRetryWithin)
	uncertain := false
	for {
		v, err := clusterCall(c.nodes[via].addr, requestTimeout, "FENCE.REMOVE", c.ids[gone])
		if err != nil {
			t.Fatalf("node %d: FENCE.REMOVE: %v", via+1, err)
		}
		if v == "OK" {
			return
		}
		if e, ok := v.(respError); ok && uncertain && strings.Contains(string(e), "no such member") {
			return
		}
		if !clusterRetryable(v) {
			t.Fatalf("node %d: FENCE.REMOVE node %d answered %#v", via+1, gone+1, v)
		}
		uncertain = true
		if time.Now().After(deadline) {
			t.Fatalf("node %d: FENCE.REMOVE node %d still answered %q after %v", via+1, gone+1, v, clusterRetryWithin)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
