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
	requireRoot(t)
	r := runCampaign(t, campaign{
		nodes: 3, duration: 15 * time.Second, seed: uint64(time.Now().UnixNano()), clientsPerNode: 4,
		bin: faultyBin, env: []string{"FENCER_FAULTS=stale-reads"},
		workloads: []workloadKind{wlLinearizable},
		kinds:     []faultKind{isolateFollower},
	})
	if v := r.violations("linearizability"); len(v) == 0 {
		t.Fatal("the linearizability checker found nothing wrong with stale reads")
	} else {
		t.Logf("caught, as it should be: %s (CHAOS_KEEP=1 keeps the file)", v[0])
	}
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
	requireRoot(t)
	r := runCampaign(t, campaign{
		nodes: 3, duration: 40 * time.Second, seed: uint64(time.Now().UnixNano()), clientsPerNode: 4,
		bin: faultyBin, env: []string{"FENCER_FAULTS=skip-lease-restart"},
		workloads: []workloadKind{wlExpiry},
		kinds:     []faultKind{transferLeader},
	})
	if v := r.violations("no early expiry"); len(v) == 0 {
		t.Fatal("the early-expiry checker found nothing wrong with skip-lease-restart")
	} else {
		t.Logf("caught, as it should be: %s", v[0])
	}
}

// TestSensitivityEarlyExpiry frees held locks before their TTL with the
// administrative FENCE.REVOKE, which hands them to the waiters queued
// behind: the early-expiry checker must report it. A revoke shows only if
// someone takes the key before the revoked lease would have ended; with
// two revokes (12 s) one CI run in several got none that did, so there are
// three or four.
func TestSensitivityEarlyExpiry(t *testing.T) {
	requireRoot(t)
	r := runCampaign(t, campaign{
		nodes: 3, duration: 22 * time.Second, seed: uint64(time.Now().UnixNano()), clientsPerNode: 4,
		bin: fencerdBin, workloads: []workloadKind{wlExpiry}, kinds: []faultKind{revokeLocks},
	})
	if v := r.violations("no early expiry"); len(v) == 0 {
		t.Fatal("the early-expiry checker found nothing wrong with locks revoked before their TTL")
	} else {
		t.Logf("caught, as it should be: %s", v[0])
	}
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
	requireRoot(t)
	r := runCampaign(t, campaign{
		nodes: 3, duration: 15 * time.Second, seed: uint64(time.Now().UnixNano()), clientsPerNode: 4,
		bin: faultyBin, env: []string{"FENCER_FAULTS=skip-fsync"}, lazy: true,
		workloads: []workloadKind{wlLinearizable, wlExpiry},
		kinds:     []faultKind{powerCutAll}, first: transferLeader,
	})
	var caught []string
	for _, checker := range []string{"tokens", "linearizability", "no early expiry", "same state"} {
		caught = append(caught, r.violations(checker)...)
	}
	if len(caught) == 0 {
		t.Fatal("no checker found anything wrong with a log that is never fsynced, across power cuts")
	}
	t.Logf("caught, as it should be: %s", caught[0])
}
