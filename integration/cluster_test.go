package integration

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClusterFollowerAcquireAndLinearizableReads acquires through one
// follower and reads through the other right after: followers forward every
// command to the leader, so the read sees the write. Every node names the
// same leader.
func TestClusterFollowerAcquireAndLinearizableReads(t *testing.T) {
	c := startNodeCluster(t, 3)
	l := c.leader(t)
	fs := c.others(l)
	a, b := fs[0], fs[1]

	var last int64
	for round := range 5 {
		key := fmt.Sprintf("lin-%d", round)
		owner := fmt.Sprintf("owner-%d", round)
		v, err := clusterCall(c.nodes[a].addr, requestTimeout, "FENCE.ACQUIRE", key, owner, "60000")
		require.NoError(t, err)
		g, ok, err := parseGrantReply(v)
		require.NoError(t, err, "acquire through follower node %d", a+1)
		require.True(t, ok, "a free lock is granted through follower node %d", a+1)
		assert.Equal(t, int64(60000), g.ttlMS)
		assert.Greater(t, g.token, last, "tokens grow")
		last = g.token

		// Right after, through the other follower: no retry, no pause.
		v, err = clusterCall(c.nodes[b].addr, requestTimeout, "FENCE.STATUS", key)
		require.NoError(t, err)
		st, ok := v.([]any)
		require.True(t, ok, "FENCE.STATUS through follower node %d right after the grant answered %#v", b+1, v)
		require.Len(t, st, 3)
		assert.Equal(t, owner, st[0])
		assert.Equal(t, g.token, st[1])
		assert.Positive(t, st[2])
		assert.LessOrEqual(t, st[2], int64(60000))

		v, err = clusterCall(c.nodes[b].addr, requestTimeout, "FENCE.CHECK", key, fmt.Sprint(g.token))
		require.NoError(t, err)
		assert.Equal(t, int64(1), v, "FENCE.CHECK of the current token through node %d", b+1)
		v, err = clusterCall(c.nodes[b].addr, requestTimeout, "FENCE.CHECK", key, fmt.Sprint(g.token-1))
		require.NoError(t, err)
		assert.Equal(t, int64(0), v, "FENCE.CHECK of an older token")

		// And the other way round: a release through b is seen through a.
		v, err = clusterCall(c.nodes[b].addr, requestTimeout, "FENCE.RELEASE", key, owner)
		require.NoError(t, err)
		assert.Equal(t, int64(1), v)
		v, err = clusterCall(c.nodes[a].addr, requestTimeout, "FENCE.STATUS", key)
		require.NoError(t, err)
		assert.Nil(t, v, "right after the release through node %d, node %d reads %s as free", b+1, a+1, key)
		v, err = clusterCall(c.nodes[l].addr, requestTimeout, "FENCE.CHECK", key, fmt.Sprint(g.token))
		require.NoError(t, err)
		assert.Equal(t, int64(0), v, "a released token no longer checks")
	}

	// Every node names the same leader, with the leader's client address.
	for i, d := range c.nodes {
		v, err := clusterCall(d.addr, requestTimeout, "FENCE.LEADER")
		require.NoError(t, err)
		id, addr, err := parseClusterLeader(v)
		require.NoError(t, err)
		assert.Equal(t, c.ids[l], id, "FENCE.LEADER on node %d", i+1)
		assert.Equal(t, c.nodes[l].addr, addr, "FENCE.LEADER on node %d", i+1)
	}
}

// TestClusterLeaderKill9Failover kills the leader with SIGKILL: a new leader
// is elected, grants new locks with larger tokens, keeps the locks granted
// before, and times the lease of a holder that died from its own start.
func TestClusterLeaderKill9Failover(t *testing.T) {
	const deadTTL = 4 * time.Second
	c := startNodeCluster(t, 3)
	l := c.leader(t)
	oldID := c.ids[l]
	survivors := c.others(l)

	// Grants before the kill, through every node.
	held := c.mustGrant(t, survivors[0], clusterRetryWithin, "held", "holder", longTTL)
	maxBefore := held.token
	for i, n := range c.all() {
		g := c.mustGrant(t, n, clusterRetryWithin, fmt.Sprintf("k%d", i), "other", longTTL)
		require.Greater(t, g.token, maxBefore)
		maxBefore = g.token
	}
	// The holder of "dead" never renews: it died with the leader.
	dead := c.mustGrant(t, survivors[1], clusterRetryWithin, "dead", "dead-holder", deadTTL)
	require.Greater(t, dead.token, maxBefore)
	maxBefore = dead.token

	killed := time.Now()
	c.nodes[l].kill9(t)
	newL, seen := c.awaitNewLeader(t, survivors, oldID, killed, clusterElectionTimeout)
	t.Logf("killed leader node %d; node %d first seen as leader %v later", l+1, newL+1, seen.Sub(killed).Round(time.Millisecond))
	assert.NotEqual(t, l, newL)
	// Both survivors come to name it.
	assert.Equal(t, newL, c.agreedLeader(t, survivors, 5*time.Second))

	// The dead holder's lease restarts at its full TTL on the new leader:
	// another owner must not get it before seen + TTL - 1s (seen is later
	// than the new leader's start), and must get it by seen + 2*TTL.
	notBefore, by := seen.Add(deadTTL-time.Second), seen.Add(2*deadTTL)
	other := survivors[0]
	if other == newL {
		other = survivors[1] // poll through the follower: forwarded
	}
	var polls, transients int
	var thief grant
	for {
		v, err := clusterCall(c.nodes[other].addr, requestTimeout, "FENCE.ACQUIRE", "dead", "thief", "60000")
		answered := time.Now()
		require.NoError(t, err, "node %d: FENCE.ACQUIRE dead thief", other+1)
		polls++
		if clusterRetryable(v) {
			transients++
		} else {
			g, ok, err := parseGrantReply(v)
			require.NoError(t, err)
			if ok {
				t.Logf("dead holder's lock granted %v after the new leader was first seen (%d polls, %d transient errors)",
					answered.Sub(seen).Round(time.Millisecond), polls, transients)
				require.False(t, answered.Before(notBefore),
					"granted to another owner %v after the new leader was first seen; the dead holder's TTL is %v",
					answered.Sub(seen), deadTTL)
				assert.False(t, answered.After(by), "granted %v after the new leader was first seen, later than %v",
					answered.Sub(seen), by.Sub(seen))
				thief = g
				break
			}
		}
		require.False(t, answered.After(by), "the dead holder's lock was not freed within %v of the new leader being seen (last reply %#v)", by.Sub(seen), v)
		time.Sleep(100 * time.Millisecond)
	}
	assert.Greater(t, thief.token, maxBefore, "a grant after the failover has a larger token than every grant before")

	// New locks, through both survivors.
	for _, n := range survivors {
		g := c.mustGrant(t, n, clusterRetryWithin, fmt.Sprintf("after-%d", n), "new", time.Minute)
		assert.Greater(t, g.token, maxBefore, "a grant through node %d after the kill", n+1)
	}

	// Locks held before the kill are still held, with the same token.
	for _, n := range survivors {
		s, isHeld := c.statusOf(t, n, clusterRetryWithin, "held")
		require.True(t, isHeld, "node %d: held is still held", n+1)
		assert.Equal(t, "holder", s.owner)
		assert.Equal(t, held.token, s.token, "same grant, same token")
		_, ok, err := parseGrantReply(c.callRetry(t, n, clusterRetryWithin, "FENCE.ACQUIRE", "held", "intruder", "1000"))
		require.NoError(t, err)
		assert.False(t, ok, "another owner is refused")
	}
	for i := range c.nodes {
		s, isHeld := c.statusOf(t, survivors[0], clusterRetryWithin, fmt.Sprintf("k%d", i))
		require.True(t, isHeld)
		assert.Equal(t, "other", s.owner)
	}
}

// TestClusterWaitSurvivesLeaderKill queues a waiting acquire through a
// follower, kills the leader, and releases the lock on the new leader: the
// waiter's one request, re-sent by its follower, ends in a grant.
func TestClusterWaitSurvivesLeaderKill(t *testing.T) {
	c := startNodeCluster(t, 3)
	l := c.leader(t)
	oldID := c.ids[l]
	fs := c.others(l)
	f, g := fs[0], fs[1] // the waiter talks to f, the holder to g

	hg := c.mustGrant(t, g, clusterRetryWithin, "w", "holder", longTTL)

	type answer struct {
		v   any
		err error
		at  time.Time
	}
	done := make(chan answer, 1)
	conn, err := net.DialTimeout("tcp", c.nodes[f].addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	const wait = 30 * time.Second
	go func() {
		v, err := clusterRoundTrip(conn, bufio.NewReader(conn), clusterServerTimeout+wait+clusterHangMargin,
			"FENCE.ACQUIRE", "w", "waiter", "30000", "WAIT", fmt.Sprint(wait.Milliseconds()))
		done <- answer{v, err, time.Now()}
	}()
	// Queued on the leader: forwarding and one commit take milliseconds.
	time.Sleep(time.Second)
	select {
	case a := <-done:
		t.Fatalf("the waiter was answered while the holder held the lock: %#v %v", a.v, a.err)
	default:
	}

	killed := time.Now()
	c.nodes[l].kill9(t)
	newL, seen := c.awaitNewLeader(t, fs, oldID, killed, clusterElectionTimeout)
	t.Logf("killed leader node %d; node %d first seen as leader %v later; waiter on node %d", l+1, newL+1, seen.Sub(killed).Round(time.Millisecond), f+1)
	select {
	case a := <-done:
		t.Fatalf("the waiter was answered by the leader change, before the release: %#v %v", a.v, a.err)
	default:
	}

	released := time.Now()
	require.Equal(t, int64(1), c.callRetry(t, g, clusterRetryWithin, "FENCE.RELEASE", "w", "holder"), "the holder releases through node %d", g+1)

	var a answer
	select {
	case a = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the waiter was not answered within 10s of the release")
	}
	require.NoError(t, a.err, "the waiter's connection")
	wg, ok, err := parseGrantReply(a.v)
	require.NoError(t, err, "the waiter gets a grant, not an error")
	require.True(t, ok, "the waiter gets a grant, not null")
	t.Logf("waiter granted %v after the release", a.at.Sub(released).Round(time.Millisecond))
	assert.Greater(t, wg.token, hg.token)
	assert.Equal(t, int64(30000), wg.ttlMS)

	s, held := c.statusOf(t, f, clusterRetryWithin, "w")
	require.True(t, held)
	assert.Equal(t, "waiter", s.owner)
	assert.Equal(t, wg.token, s.token)
}

// TestClusterKilledNodeRejoins kills the leader, takes a lock while it is
// down, and restarts it with its original flags (same data directory, same
// --join): it is a member again and answers for the lock it never saw.
func TestClusterKilledNodeRejoins(t *testing.T) {
	c := startNodeCluster(t, 3)
	// Kill node 3, started with --join, so that the restart shows that a
	// node with state ignores --join.
	const k = 2
	if l := c.leader(t); l != k {
		c.transfer(t, 0, k)
	}
	survivors := c.others(k)
	before := c.mustGrant(t, survivors[0], clusterRetryWithin, "before", "a", longTTL)

	killed := time.Now()
	c.nodes[k].kill9(t)
	newL, seen := c.awaitNewLeader(t, survivors, c.ids[k], killed, clusterElectionTimeout)
	t.Logf("killed leader node %d; node %d first seen as leader %v later", k+1, newL+1, seen.Sub(killed).Round(time.Millisecond))
	down := c.mustGrant(t, survivors[1], clusterRetryWithin, "while-down", "b", longTTL)
	require.Greater(t, down.token, before.token)

	restarted := time.Now()
	c.nodes[k].restart(t)
	// Right after its restart the node may not have caught up on the log,
	// and not know the leader's client address to forward to: it answers
	// NOTLEADER until it does.
	s, held := c.statusOf(t, k, clusterReadyTimeout, "while-down")
	t.Logf("restarted node %d answered FENCE.STATUS %v after its restart", k+1, time.Since(restarted).Round(time.Millisecond))
	require.True(t, held, "the restarted node answers for a lock granted while it was down")
	assert.Equal(t, "b", s.owner)
	assert.Equal(t, down.token, s.token)
	v := c.callRetry(t, k, clusterRetryWithin, "FENCE.CHECK", "while-down", fmt.Sprint(down.token))
	assert.Equal(t, int64(1), v)
	s, held = c.statusOf(t, k, clusterRetryWithin, "before")
	require.True(t, held)
	assert.Equal(t, before.token, s.token)

	// Every node lists it again, with its client address.
	c.awaitMembers(t, c.all(), c.all(), clusterReadyTimeout)
	assert.Contains(t, c.nodes[k].log(t), "restarting from existing state", "node 3 restarted from its data, not by joining")

	// And it takes writes: through it, a new lock with a larger token.
	g := c.mustGrant(t, k, clusterRetryWithin, "via-restarted", "c", time.Minute)
	assert.Greater(t, g.token, down.token)
}

// TestClusterFullRestartKeepsLocksAndTokens kills all three nodes with
// SIGKILL and restarts them with the same flags: every acknowledged grant
// and release is kept, and tokens keep growing.
func TestClusterFullRestartKeepsLocksAndTokens(t *testing.T) {
	c := startNodeCluster(t, 3)
	type lock struct {
		key, owner string
		token      int64
	}
	var locks []lock
	var maxBefore int64
	for i := range c.nodes {
		for j := range 3 {
			key, owner := fmt.Sprintf("k%d-%d", i, j), fmt.Sprintf("o%d", j)
			g := c.mustGrant(t, i, clusterRetryWithin, key, owner, longTTL)
			require.Greater(t, g.token, maxBefore)
			maxBefore = g.token
			locks = append(locks, lock{key, owner, g.token})
		}
	}
	gone := c.mustGrant(t, 1, clusterRetryWithin, "gone", "x", longTTL)
	maxBefore = gone.token
	require.Equal(t, int64(1), c.callRetry(t, 2, clusterRetryWithin, "FENCE.RELEASE", "gone", "x"))

	for _, d := range c.nodes {
		d.kill9(t)
	}
	restarted := time.Now()
	for _, d := range c.nodes {
		d.restart(t)
	}
	c.awaitMembers(t, c.all(), c.all(), clusterReadyTimeout)
	t.Logf("cluster re-formed %v after the restart; leader is node %d", time.Since(restarted).Round(time.Millisecond), c.leader(t)+1)

	for i := range c.nodes {
		for _, lk := range locks {
			s, held := c.statusOf(t, i, clusterRetryWithin, lk.key)
			require.True(t, held, "node %d: %s is still held", i+1, lk.key)
			assert.Equal(t, lk.owner, s.owner, "node %d: %s", i+1, lk.key)
			assert.Equal(t, lk.token, s.token, "node %d: %s keeps its token", i+1, lk.key)
		}
		_, held := c.statusOf(t, i, clusterRetryWithin, "gone")
		assert.False(t, held, "node %d: a release acknowledged before the kill is kept", i+1)
	}
	assert.Equal(t, int64(1), c.callRetry(t, 0, clusterRetryWithin, "FENCE.RELEASE", "gone", "x"), "the release is remembered")
	_, ok, err := parseGrantReply(c.callRetry(t, 0, clusterRetryWithin, "FENCE.ACQUIRE", locks[0].key, "intruder", "1000"))
	require.NoError(t, err)
	assert.False(t, ok, "another owner is refused after the restart")

	for i := range c.nodes {
		g := c.mustGrant(t, i, clusterRetryWithin, fmt.Sprintf("fresh-%d", i), "me", time.Minute)
		assert.Greater(t, g.token, maxBefore, "node %d: a token after the restart exceeds every token before", i+1)
		maxBefore = g.token
	}
}

// TestClusterTransferAndRemove moves leadership with FENCE.TRANSFER, then
// removes a follower with FENCE.REMOVE: locks survive both, and the
// two-node cluster still grants.
func TestClusterTransferAndRemove(t *testing.T) {
	c := startNodeCluster(t, 3)
	l := c.leader(t)
	fs := c.others(l)
	to, r := fs[0], fs[1]

	x := c.mustGrant(t, to, clusterRetryWithin, "x", "me", longTTL)

	// Sent to the other follower, which forwards it to the leader.
	transferred := time.Now()
	c.transfer(t, r, to)
	t.Logf("leadership moved from node %d to node %d in %v", l+1, to+1, time.Since(transferred).Round(time.Millisecond))

	for i := range c.nodes {
		s, held := c.statusOf(t, i, clusterRetryWithin, "x")
		require.True(t, held, "node %d: x survives the transfer", i+1)
		assert.Equal(t, x.token, s.token)
	}
	y := c.mustGrant(t, l, clusterRetryWithin, "y", "me", longTTL)
	assert.Greater(t, y.token, x.token)

	// Remove follower r, through the former leader (now a follower).
	c.remove(t, l, r)
	rest := []int{to, l}
	c.awaitMembers(t, rest, rest, 10*time.Second)
	for _, i := range rest {
		v, err := clusterCall(c.nodes[i].addr, requestTimeout, "FENCE.MEMBERS")
		require.NoError(t, err)
		ms, err := parseClusterMembers(v)
		require.NoError(t, err)
		assert.Len(t, ms, 2, "node %d: FENCE.MEMBERS after the remove", i+1)
		for _, m := range ms {
			assert.NotEqual(t, c.ids[r], m.id, "node %d still lists the removed node", i+1)
		}
	}

	last := y.token
	for _, i := range rest {
		g := c.mustGrant(t, i, clusterRetryWithin, fmt.Sprintf("z%d", i), "me", time.Minute)
		assert.Greater(t, g.token, last, "node %d grants after the remove", i+1)
		last = g.token
		s, held := c.statusOf(t, i, clusterRetryWithin, "x")
		require.True(t, held)
		assert.Equal(t, x.token, s.token)
	}
	assert.Equal(t, to, c.agreedLeader(t, rest, 5*time.Second), "the leader did not change")
}

// TestClusterAcquireDuringElectionAnswers keeps clients acquiring through
// the followers while the leader is killed and a new one elected: every
// request is answered (a grant, a null, or an error saying UNCERTAIN,
// NOLEADER or NOTLEADER) within the request timeout, over a connection that
// stays open.
func TestClusterAcquireDuringElectionAnswers(t *testing.T) {
	c := startNodeCluster(t, 3)
	l := c.leader(t)
	oldID := c.ids[l]
	fs := c.others(l)

	stop := make(chan struct{})
	var clients []*clusterElectionClient
	for _, f := range fs {
		for j := range 2 {
			cl := &clusterElectionClient{node: f, done: make(chan struct{})}
			clients = append(clients, cl)
			conn, err := net.DialTimeout("tcp", c.nodes[f].addr, 5*time.Second)
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			go func(cl *clusterElectionClient, conn net.Conn, name string) {
				defer close(cl.done)
				rd := bufio.NewReader(conn)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					sent := time.Now()
					v, err := clusterRoundTrip(conn, rd, clusterServerTimeout+clusterHangMargin,
						"FENCE.ACQUIRE", fmt.Sprintf("%s-%d", name, i), name, "60000")
					cl.mu.Lock()
					cl.results = append(cl.results, clusterAcquireResult{sent, time.Now(), v, err})
					cl.mu.Unlock()
					if err != nil {
						return // the connection is gone or hung: reported below
					}
					time.Sleep(20 * time.Millisecond)
				}
			}(cl, conn, fmt.Sprintf("n%d-c%d", f+1, j))
		}
	}

	time.Sleep(500 * time.Millisecond) // requests flowing through the old leader
	killed := time.Now()
	c.nodes[l].kill9(t)

	// Probes: from the kill on, a fresh connection to each follower every
	// 150 ms, each sending one acquire, so that requests start at every
	// stage of the election (old leader still believed, no leader, new
	// leader not ready yet).
	var probes struct {
		sync.Mutex
		wg      sync.WaitGroup
		results []clusterAcquireResult
		nodes   []int
	}
	probeStop := make(chan struct{})
	probes.wg.Add(1)
	go func() {
		defer probes.wg.Done()
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			for _, f := range fs {
				probes.wg.Add(1)
				go func(f int, key string) {
					defer probes.wg.Done()
					sent := time.Now()
					v, err := clusterCall(c.nodes[f].addr, clusterServerTimeout+clusterHangMargin, "FENCE.ACQUIRE", key, key, "60000")
					probes.Lock()
					probes.results = append(probes.results, clusterAcquireResult{sent, time.Now(), v, err})
					probes.nodes = append(probes.nodes, f)
					probes.Unlock()
				}(f, fmt.Sprintf("probe-%d-%d", f+1, i))
			}
			select {
			case <-probeStop:
				return
			case <-tick.C:
			}
		}
	}()
	newL, seen := c.awaitNewLeader(t, fs, oldID, killed, clusterElectionTimeout)
	t.Logf("killed leader node %d; node %d first seen as leader %v later", l+1, newL+1, seen.Sub(killed).Round(time.Millisecond))
	// Keep going until every client has been granted a lock it asked for
	// after the new leader was seen (or has stopped on an error).
	deadline := seen.Add(clusterServerTimeout + clusterHangMargin)
	for time.Now().Before(deadline) {
		settled := true
		for _, cl := range clients {
			select {
			case <-cl.done:
				continue
			default:
			}
			cl.mu.Lock()
			settled = settled && cl.grantedAfter(seen)
			cl.mu.Unlock()
		}
		if settled {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	close(probeStop)
	probesDone := make(chan struct{})
	go func() { probes.wg.Wait(); close(probesDone) }()
	select {
	case <-probesDone:
	case <-time.After(clusterServerTimeout + 2*clusterHangMargin):
		t.Fatal("a probe is stuck in a request")
	}
	for _, cl := range clients {
		select {
		case <-cl.done:
		case <-time.After(clusterServerTimeout + 2*clusterHangMargin):
			t.Fatalf("a client on node %d is stuck in a request", cl.node+1)
		}
	}

	probeKinds := map[string]int{}
	for i, r := range probes.results {
		f := probes.nodes[i]
		took := r.answered.Sub(r.sent)
		if r.err != nil {
			t.Errorf("node %d: a probe sent %v after the kill ended without a reply after %v: %v (connection closed or request hung)",
				f+1, r.sent.Sub(killed).Round(time.Millisecond), took.Round(time.Millisecond), r.err)
			continue
		}
		assert.LessOrEqual(t, took, clusterServerTimeout+clusterHangMargin, "node %d: a probe took %v", f+1, took)
		probeKinds[clusterReplyKind(r.v)]++
		if _, _, err := parseGrantReply(r.v); err != nil {
			assert.True(t, clusterRetryable(r.v), "node %d: probe sent %v after the kill answered %#v; want a grant, null, UNCERTAIN, NOLEADER or NOTLEADER",
				f+1, r.sent.Sub(killed).Round(time.Millisecond), r.v)
		}
	}
	t.Logf("%d probes on fresh connections from the kill to %v after it: replies %v",
		len(probes.results), time.Since(killed).Round(time.Millisecond), probeKinds)

	for _, cl := range clients {
		var last int64
		kinds := map[string]int{}
		var during, grantedAfter int
		var slowest time.Duration
		for _, r := range cl.results {
			took := r.answered.Sub(r.sent)
			slowest = max(slowest, took)
			if !r.sent.After(seen) && !r.answered.Before(killed) {
				during++
			}
			if r.err != nil {
				t.Errorf("node %d: a request sent %v after the kill ended without a reply after %v: %v (connection closed or request hung)",
					cl.node+1, r.sent.Sub(killed).Round(time.Millisecond), took.Round(time.Millisecond), r.err)
				continue
			}
			assert.LessOrEqual(t, took, clusterServerTimeout+clusterHangMargin, "node %d: a request took %v", cl.node+1, took)
			switch v := r.v.(type) {
			case nil:
				kinds["null"]++
			case respError:
				kind := strings.SplitN(string(v), " ", 2)[0]
				kinds[kind]++
				assert.True(t, clusterRetryable(v), "node %d: request sent %v after the kill answered %q; want a grant, null, UNCERTAIN, NOLEADER or NOTLEADER",
					cl.node+1, r.sent.Sub(killed).Round(time.Millisecond), v)
			default:
				g, ok, err := parseGrantReply(v)
				if !assert.NoError(t, err, "node %d", cl.node+1) || !ok {
					continue
				}
				kinds["grant"]++
				assert.Greater(t, g.token, last, "node %d: tokens grow on one connection", cl.node+1)
				last = g.token
				if r.sent.After(seen) {
					grantedAfter++
				}
			}
		}
		t.Logf("client on node %d: %d requests, %d in flight during the election, replies %v, slowest %v",
			cl.node+1, len(cl.results), during, kinds, slowest.Round(time.Millisecond))
		assert.Positive(t, during, "node %d: no request was in flight during the election", cl.node+1)
		assert.Positive(t, grantedAfter, "node %d: nothing was granted after the new leader was seen", cl.node+1)
		if kinds["null"] > 0 {
			t.Logf("node %d: %d acquires of fresh keys answered null", cl.node+1, kinds["null"])
		}
	}
}

// clusterAcquireResult is one request of a clusterElectionClient.
type clusterAcquireResult struct {
	sent, answered time.Time
	v              any
	err            error
}

// clusterElectionClient sends acquires one after another over one connection.
type clusterElectionClient struct {
	node    int
	done    chan struct{} // closed when the client stops
	mu      sync.Mutex
	results []clusterAcquireResult
}

// grantedAfter reports whether a request sent after t was granted. Call it
// with cl.mu held.
func (cl *clusterElectionClient) grantedAfter(t time.Time) bool {
	for _, r := range cl.results {
		if _, ok, err := parseGrantReply(r.v); r.sent.After(t) && r.err == nil && err == nil && ok {
			return true
		}
	}
	return false
}

// clusterReplyKind names a reply for a summary: "grant", "null", the first word of
// an error reply, or "other".
func clusterReplyKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case respError:
		return strings.SplitN(string(v), " ", 2)[0]
	}
	if _, ok, err := parseGrantReply(v); err == nil && ok {
		return "grant"
	}
	return "other"
}
