package integration

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Raft address that reaches another member is refused (server/peerid.go).
// Raft counts a vote, and an acknowledgement, as the configured server's
// whoever answers at its address (raft.go: voteResult.voterID is the
// target's ID, never the answer's); so every Raft connection names the
// server it is meant for, and the acceptor closes one meant for another. A Raft address given
// as a name (--raft-advertise fencer-2.fencer..., resolved at every dial,
// server/stream.go) reaches another member while the name still resolves
// to an IP that member now has (a rescheduled pod given the old IP of one
// that is down, before the DNS record changes; every pod has the same Raft
// port). Here, in a cluster of 5, a grant commits on L, V and A while X
// and M are down; L and V go down; M comes back reachable at its own
// address and at V's (loopback cannot re-point a name, so M listens on V's
// port and a proxy keeps its own). Without the check, X asked M twice (as
// M and as V) and led with 3 "votes" of 5 from 2 servers, neither with the
// grant; A, the only live server with it, followed X and lost it (failed
// so on deploy 2eb1653). With it, M refuses what is meant for V.
func TestRaftAddressReachingAnotherMemberCountsOnce(t *testing.T) {
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
	deadline := time.Now().Add(15 * time.Second)
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
	deadline = time.Now().Add(15 * time.Second)
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
	// M refused what was meant for V (and said so).
	want := fmt.Sprintf("it is meant for server %q, and this is %q", ids[v], ids[m])
	if log := ds[m].log(t); !strings.Contains(log, "raft connection refused") || !strings.Contains(log, strconv.Quote(want)[1:len(strconv.Quote(want))-1]) {
		t.Fatalf("grant %d kept, but n%d did not refuse a connection meant for n%d: %s", g.token, m+1, v+1, grepLines(log, "raft connection"))
	}
	t.Logf("grant %d kept: %s; n%d: %s", g.token, last, m+1, lastLine(grepLines(ds[m].log(t), "raft connection refused")))
}
