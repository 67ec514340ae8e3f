//go:build fencer_faults

package server

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// More deliberate bugs (faultnames.go has those named outside this file).
const (
	// faultSkipFsync: raft-wal's segment files are never fsynced (nor the
	// directory that names a new one), so an entry counts as stored while
	// it is only in the page cache (breaks "an acknowledged grant is never
	// lost" across a power cut).
	faultSkipFsync = "skip-fsync"
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

// walFS is raft-wal's file system, without fsync under skip-fsync.
func walFS() types.VFS {
	if faultActive(faultSkipFsync) {
		return noSyncFS{walfs.New()}
	}
	return walfs.New()
}

// noSyncFS is raft-wal's file system whose files' Sync does nothing.
type noSyncFS struct{ *walfs.FS }

func (f noSyncFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	w, err := f.FS.Create(dir, name, size)
	return noSyncFile{w}, err
}

func (f noSyncFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	w, err := f.FS.OpenWriter(dir, name)
	return noSyncFile{w}, err
}

type noSyncFile struct{ types.WritableFile }

func (noSyncFile) Sync() error { return nil }

// clockRateEnv names the variable that makes this node's lease clock run at
// a factor of real time: FENCER_CLOCK_RATE=1.05 runs it 5 % fast (leases end
// after TTL/1.05 of real time), 0.9 runs it slow. Only the lessor's clock is
// scaled; Raft's timers and everything else keep real time. It lets the
// fault campaign measure how much faster than a client's clock a leader's
// may run before leases end early (docs/safety.md, Clocks that run at
// different rates).
const clockRateEnv = "FENCER_CLOCK_RATE"

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

// leaseClock is the clock the lessor times leases on: real time scaled by
// rate (zero: real time).
type leaseClock struct{ rate float64 }

// newLeaseClock reads FENCER_CLOCK_RATE when a node opens. A value that is
// not a positive factor stops the node: a fault build is only ever run by a
// test, which should not go on measuring the wrong thing.
func newLeaseClock() leaseClock {
	s := os.Getenv(clockRateEnv)
	if s == "" {
		return leaseClock{}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		panic(fmt.Sprintf("server: %s=%q: want a positive factor such as 1.05", clockRateEnv, s))
	}
	return leaseClock{rate: f}
}

// leaseTime converts real elapsed time to elapsed lease time. Rounding is
// down: the lease clock never reads ahead of rate × real time.
func (c leaseClock) leaseTime(d time.Duration) time.Duration {
	if c.rate == 0 {
		return d
	}
	return time.Duration(math.Floor(float64(d) * c.rate))
}

// realTime converts elapsed lease time to the real time it takes. Rounding
// is up, so a timer set with it never fires before the lease clock reaches
// its deadline.
func (c leaseClock) realTime(d time.Duration) time.Duration {
	if c.rate == 0 {
		return d
	}
	return time.Duration(math.Ceil(float64(d) / c.rate))
}
