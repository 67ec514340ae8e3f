//go:build !fencer_faults

package server

import (
	"time"

	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// faultActive reports whether a deliberate bug is switched on. Faults exist
// only in binaries built with -tags fencer_faults, for the fault campaign's
// sensitivity tests (integration/chaos); this build has none.
func faultActive(string) bool { return false }

// faultPoint is where a build with -tags fencer_faults lets a test step in
// (see faults_enabled.go); in this build it does nothing and reports false.
func faultPoint(string, any) bool { return false }

// faultAfterCommit is where a build with -tags fencer_faults may move
// leadership away after a request's entry committed; here it does nothing.
func (n *Node) faultAfterCommit() {}

// faultBeforeCommit is where a build with -tags fencer_faults may move
// leadership away after a transaction was worked out and before its entry
// is proposed; here it does nothing.
func (n *Node) faultBeforeCommit() {}

// leaseClock is the clock the lessor times leases on. In this build it is
// the real monotonic clock: both conversions are the identity and inline to
// nothing. A build with -tags fencer_faults can make it run fast or slow
// (FENCER_CLOCK_RATE, faults_enabled.go).
type leaseClock struct{}

func newLeaseClock() leaseClock { return leaseClock{} }

// leaseTime converts real elapsed time to elapsed lease time.
func (leaseClock) leaseTime(d time.Duration) time.Duration { return d }

// realTime converts elapsed lease time to the real time it takes.
func (leaseClock) realTime(d time.Duration) time.Duration { return d }

// walFS is the file system raft-wal writes its segments through: the
// operating system's, with every fsync.
func walFS() types.VFS { return walfs.New() }
