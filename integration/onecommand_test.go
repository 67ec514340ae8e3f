package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// One command, one entry (docs/design.md, invariant 6): these tests move
// leadership right after a command's first entry commits, with the fault
// fencerd build's transfer-after-commit (server/faults_enabled.go). A
// command of several steps would then fail its next step with "not leader"
// and be forwarded and run again on the new leader, repeating what had
// committed. A command of one entry has no next step.

// startTransferCluster starts three faulty-build nodes that hand leadership
// away after the first commit that follows arming; it returns the cluster
// and the arming function.
func startTransferCluster(t *testing.T) (*nodeCluster, func()) {
	t.Helper()
	return startFaultCluster(t, "transfer-after-commit")
}

// startFaultCluster starts three faulty-build nodes with fault switched on,
// armed by the function it returns.
func startFaultCluster(t *testing.T, fault string) (*nodeCluster, func()) {
	t.Helper()
	armFile := filepath.Join(t.TempDir(), "arm")
	c := startNodeClusterWith(t, 3, func(d *daemon) {
		d.bin = faultyBin
		d.env = []string{"FENCER_FAULTS=" + fault, "FENCER_FAULT_ARM=" + armFile}
	})
	arm := func() {
		t.Helper()
		if err := os.WriteFile(armFile, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c, arm
}

// awaitLeaderOtherThan waits until every node names a leader other than old.
func (c *nodeCluster) awaitLeaderOtherThan(t *testing.T, old int) int {
	t.Helper()
	deadline := time.Now().Add(clusterElectionTimeout)
	for {
		if idx, why := c.leaderOnce(c.all()); why == "" && idx != old {
			return idx
		}
		if time.Now().After(deadline) {
			t.Fatalf("leadership did not move from node %d", old+1)
		}
		time.Sleep(clusterPollEvery)
	}
}

// TestOneEntryRedissonUnlockAcrossLeaderChange: a Redisson lock entered twice
// and left once is still held (Redis answers 0), even when leadership moves
// right after the unlock commits; another client is then refused.
func TestOneEntryRedissonUnlockAcrossLeaderChange(t *testing.T) {
	c, arm := startTransferCluster(t)
	l := c.leader(t)
	a := dialRESP(t, c.nodes[l])
	const key, owner = "{order}", "uuid-a:1"
	for i := 0; i < 2; i++ {
		if v := a.do(t, "EVAL", redissonLock319, "1", key, "30000", owner); v != nil {
			t.Fatalf("lock #%d by A: %#v, want nil (taken)", i+1, v)
		}
	}
	arm()
	if v := a.do(t, "EVAL", redissonUnlock3106, "2", key, "redisson_lock__channel:"+key, "0", "30000", owner); v != int64(0) {
		t.Fatalf("A's first unlock of two holds answered %#v; Redis answers 0 (still held)", v)
	}
	nl := c.awaitLeaderOtherThan(t, l)
	t.Logf("leadership moved from node %d to node %d after the unlock committed", l+1, nl+1)

	b := dialRESP(t, c.nodes[nl])
	v := b.do(t, "EVAL", redissonLock319, "1", key, "30000", "uuid-b:1")
	if ttl, ok := v.(int64); !ok || ttl <= 0 {
		t.Fatalf("B's lock while A still holds once answered %#v; want A's remaining ms", v)
	}
	if v := b.do(t, "HGET", key, owner); v != "1" {
		t.Fatalf("A's hold count is %#v; want 1 (A still holds the lock once)", v)
	}
}

// TestOneEntryDelHandsToWaiterAcrossLeaderChange: DEL frees a held lock and
// the same entry hands it to the waiter; leadership moves right after. The
// waiter was answered with a grant, so it must still hold the lock.
func TestOneEntryDelHandsToWaiterAcrossLeaderChange(t *testing.T) {
	c, arm := startTransferCluster(t)
	l := c.leader(t)
	h := dialRESP(t, c.nodes[l])
	const key = "k"
	if _, ok, err := parseGrantReply(h.do(t, "FENCE.ACQUIRE", key, "H", "60000")); err != nil || !ok {
		t.Fatalf("H's acquire: %v", err)
	}
	w := dialRESP(t, c.nodes[l])
	type reply struct {
		g   grant
		ok  bool
		err error
	}
	got := make(chan reply, 1)
	go func() {
		v, err := clusterRoundTrip(w.c, w.r, requestTimeout+30*time.Second, "FENCE.ACQUIRE", key, "W", "60000", "WAIT", "30000")
		if err != nil {
			got <- reply{err: err}
			return
		}
		g, ok, err := parseGrantReply(v)
		got <- reply{g, ok, err}
	}()
	time.Sleep(500 * time.Millisecond) // W queues on the leader
	arm()
	if v := h.do(t, "DEL", key); v != int64(1) {
		t.Fatalf("DEL of a held lock answered %#v, want 1", v)
	}
	r := <-got
	if r.err != nil || !r.ok {
		t.Fatalf("W's WAIT: granted %v, %v", r.ok, r.err)
	}
	nl := c.awaitLeaderOtherThan(t, l)
	t.Logf("leadership moved from node %d to node %d after DEL committed; W got token %d", l+1, nl+1, r.g.token)
	s, held := c.statusOf(t, nl, clusterRetryWithin, key)
	if !held || s.owner != "W" || s.token != r.g.token {
		t.Fatalf("after DEL and the leader change the lock is %+v (held %v); W was told it holds token %d", s, held, r.g.token)
	}
}

// Redisson RLock's lock (3.19.0 on) and unlock (3.10.6..3.21.3) scripts, as
// its source has them.
const (
	redissonLock319    = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);"
	redissonUnlock3106 = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;"
)

// TestOneEntryScriptLeaderChangeBeforeCommit: the leader works a script out,
// then loses leadership before it proposes the entry. Nothing was appended,
// so the command goes to the new leader, which runs the script afresh: its
// effect happens once.
func TestOneEntryScriptLeaderChangeBeforeCommit(t *testing.T) {
	c, arm := startFaultCluster(t, "transfer-before-commit")
	l := c.leader(t)
	conn := dialRESP(t, c.nodes[l])
	const script = "redis.call('set', KEYS[2], ARGV[1]) return redis.call('incr', KEYS[1])"
	if v := conn.do(t, "EVAL", script, "2", "count", "last", "first"); v != int64(1) {
		t.Fatalf("first run: %#v", v)
	}
	arm()
	if v := conn.do(t, "EVAL", script, "2", "count", "last", "second"); v != int64(2) {
		t.Fatalf("the script across the leader change answered %#v, want 2 (run once)", v)
	}
	nl := c.awaitLeaderOtherThan(t, l)
	t.Logf("leadership moved from node %d to node %d between the script's evaluation and its commit", l+1, nl+1)
	other := dialRESP(t, c.nodes[nl])
	if v := other.do(t, "GET", "count"); v != "2" {
		t.Fatalf("count is %#v on the new leader, want 2", v)
	}
	if v := other.do(t, "GET", "last"); v != "second" {
		t.Fatalf("last is %#v, want second", v)
	}
}
