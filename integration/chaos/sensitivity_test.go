//go:build linux

package chaos

import (
	"testing"
	"time"
)

// The sensitivity tests run the checkers against fencerd built with
// -tags fencer_faults and a deliberate bug switched on, and pass only if
// the checker meant to catch that bug reports a violation. A checker that
// never fails proves nothing.

// TestSensitivityStaleReads: with stale-reads, FENCE.STATUS is answered
// from the local table of whichever node gets it, without forwarding or
// confirming leadership. Clients of an isolated follower then read locks
// that were released long ago: the linearizability checker must say so.
func TestSensitivityStaleReads(t *testing.T) {
	wantCaught(t, "stale reads", campaign{
		duration: 15 * time.Second, bin: faultyBin, env: []string{"FENCER_FAULTS=stale-reads"},
		workloads: []workloadKind{wlLinearizable},
		kinds:     []faultKind{isolateFollower},
	}, "linearizability")
}

// TestSensitivitySkipLeaseRestart: with skip-lease-restart, a new leader
// does not restart every lease at its full TTL (and followers record no
// deadlines to fall back on), so it frees inherited leases at once. The
// early-expiry checker must catch a lock granted again before the previous
// holder's lease could end. Only a failover faster than the 1.2 s leases
// can show it (a kill or a partition takes 1.3-3 s to elect a new leader,
// by which time every inherited lease has run out anyway), so the faults
// are leader transfers, each a handover in tens of milliseconds. (With
// kills and partitions in the deck too, a run could draw a single transfer
// and miss it.)
func TestSensitivitySkipLeaseRestart(t *testing.T) {
	wantCaught(t, "skip-lease-restart", campaign{
		duration: 40 * time.Second, bin: faultyBin, env: []string{"FENCER_FAULTS=skip-lease-restart"},
		workloads: []workloadKind{wlExpiry},
		kinds:     []faultKind{transferLeader},
	}, "no early expiry")
}

// TestSensitivityEarlyExpiry frees held locks before their TTL with the
// administrative FENCE.REVOKE, which hands them to the waiters queued
// behind: the early-expiry checker must report it. A revoke shows only if
// someone takes the key before the revoked lease would have ended; with
// two revokes (12 s) one CI run in several got none that did, so there are
// three or four.
func TestSensitivityEarlyExpiry(t *testing.T) {
	wantCaught(t, "locks revoked before their TTL", campaign{
		duration: 22 * time.Second, bin: fencerdBin,
		workloads: []workloadKind{wlExpiry},
		kinds:     []faultKind{revokeLocks},
	}, "no early expiry")
}

// TestSensitivitySkipFsync: with skip-fsync, raft-wal's segments are never
// fsynced, so an acknowledged entry may exist only in memory. Power cuts of
// every node at once, on lazyfs, then throw the log away back to each
// node's last snapshot: acknowledged grants are lost and their tokens
// granted again. A checker must say so: tokens, linearizability, early
// expiry or the state hashes (a node that refuses to start, or a cluster
// that does not form again, is not enough). The first power cut comes after a leader transfer,
// a few seconds in, when the nodes have snapshots to fall back to (without
// one they lose the configuration too, and wait for peers for good).
func TestSensitivitySkipFsync(t *testing.T) {
	wantCaught(t, "a log that is never fsynced, across power cuts", campaign{
		duration: 15 * time.Second, bin: faultyBin, env: []string{"FENCER_FAULTS=skip-fsync"}, lazy: true,
		workloads: []workloadKind{wlLinearizable, wlExpiry},
		kinds:     []faultKind{powerCutAll}, first: transferLeader,
	}, "tokens", "linearizability", "no early expiry", "same state")
}

// wantCaught runs campaign c on three nodes with four clients each, and
// fails the test unless one of checkers reports a violation: bug says what
// the run did wrong.
func wantCaught(t *testing.T, bug string, c campaign, checkers ...string) {
	t.Helper()
	requireRoot(t)
	c.nodes, c.clientsPerNode, c.seed = 3, 4, uint64(time.Now().UnixNano())
	r := runCampaign(t, c)
	var caught []string
	for _, checker := range checkers {
		caught = append(caught, r.violations(checker)...)
	}
	if len(caught) == 0 {
		t.Fatalf("no checker of %q found anything wrong with %s", checkers, bug)
	}
	t.Logf("caught, as it should be: %s (CHAOS_KEEP=1 keeps the run's files)", caught[0])
}
