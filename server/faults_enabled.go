//go:build fencer_faults

package server

import (
	"os"
	"strings"
	"sync"
)

// Deliberate bugs, switched on by name in the FENCER_FAULTS environment
// variable (comma-separated), in binaries built with -tags fencer_faults. They
// let the fault campaign show that its checkers catch real violations.
const (
	// faultSkipLeaseRestart: a new leader does not restart every lease at
	// its full TTL, and followers record no deadlines, so a new leader
	// treats every inherited lease as run out and frees it early (breaks
	// "no early expiry").
	faultSkipLeaseRestart = "skip-lease-restart"
	// faultStaleReads: reads are answered from the local table without
	// confirming leadership or forwarding (breaks "linearizable reads").
	faultStaleReads = "stale-reads"
)

// Injected faults, not bugs: they move the cluster between two steps of the
// code so that tests with real processes can reach an interleaving on demand.
const (
	// faultTransferAfterCommit: once a request's entry has committed on the
	// leader, if the file named by FENCER_FAULT_ARM exists, it is removed and
	// the leader hands leadership to another node before the request goes
	// on. A test arms it right before the one command it is about.
	faultTransferAfterCommit = "transfer-after-commit"
	// faultTransferBeforeCommit: the same, but after a transaction (a
	// script) was worked out and before its entry is proposed.
	faultTransferBeforeCommit = "transfer-before-commit"
)

var activeFaults = strings.Split(os.Getenv("FENCER_FAULTS"), ",")

func faultActive(name string) bool {
	for _, f := range activeFaults {
		if f == name {
			return true
		}
	}
	return false
}

// faultPoints holds the functions in-process tests (built with the tag) set
// at named points of the code; see setFaultPoint.
var faultPoints sync.Map // name → func(any) bool

// setFaultPoint makes faultPoint(name, arg) call fn(arg) until the returned
// function is called. What fn returns is the point's to interpret (for
// example: drop this notification).
func setFaultPoint(name string, fn func(any) bool) (unset func()) {
	faultPoints.Store(name, fn)
	return func() { faultPoints.Delete(name) }
}

// faultPoint calls the function a test set at name, if any.
func faultPoint(name string, arg any) bool {
	if fn, ok := faultPoints.Load(name); ok {
		return fn.(func(any) bool)(arg)
	}
	return false
}

// faultAfterCommit moves leadership away once, when armed (see
// faultTransferAfterCommit).
func (n *Node) faultAfterCommit() { n.faultTransfer(faultTransferAfterCommit) }

// faultBeforeCommit moves leadership away once, when armed (see
// faultTransferBeforeCommit).
func (n *Node) faultBeforeCommit() { n.faultTransfer(faultTransferBeforeCommit) }

func (n *Node) faultTransfer(fault string) {
	if !faultActive(fault) {
		return
	}
	arm := os.Getenv("FENCER_FAULT_ARM")
	if arm == "" || os.Remove(arm) != nil {
		return
	}
	n.log.Warn("fault: handing leadership away", "fault", fault)
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		n.log.Warn("fault: leadership transfer failed", "err", err)
	}
}
