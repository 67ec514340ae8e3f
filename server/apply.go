package server

import (
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
)

// applier is the node's raft.FSM (a raft.BatchingFSM): it applies committed
// entries to the lock table and makes the grant bookkeeping follow (lease
// timers, quotas, waiters), under the bookkeeping's lock, so that a grant is
// timed and its waiter answered in the critical section that applies it.
// Raft calls it from one goroutine.
type applier struct {
	table   *fsm.Table
	grants  *grants
	metrics *metrics
	watches *watchHub
	// snapPos is the table's position (fsm.Table.Position) when the last
	// snapshot was taken or restored.
	snapPos atomic.Uint64
	// applying is when the apply in progress started (Unix nanoseconds),
	// zero between applies: Node.Live reads it.
	applying atomic.Int64
	// id records the cluster's ID in the data directory once applied.
	id identity
	// stopped is set (on the FSM goroutine) once an entry or snapshot of a
	// format this build cannot read was met: nothing is applied or
	// snapshotted after it (format.go, halt). halted then carries the
	// error (Node.Stopped), and onHalt shuts Raft down.
	stopped bool
	halted  chan error
	// onHalt is set once Raft runs (Open), while the FSM goroutine may
	// already halt: halt calls it if set, and Open calls it itself if
	// haltSeen is already true, so Raft is shut down either way.
	onHalt   atomic.Pointer[func()]
	haltSeen atomic.Bool
}

// applyingSince returns when the apply in progress started (Unix
// nanoseconds), or zero if none is.
func (a *applier) applyingSince() int64 { return a.applying.Load() }

func (a *applier) Apply(l *raft.Log) interface{} {
	a.applying.Store(time.Now().UnixNano())
	defer a.applying.Store(0)
	a.grants.lockApply()
	res := a.applyLocked(l)
	a.watches.advancedLocked()
	a.grants.unlockAndYieldToGranted()
	return res
}

// ApplyBatch makes applier a raft.BatchingFSM: Raft hands it every entry
// committed together, and the lock is taken once for them all.
func (a *applier) ApplyBatch(logs []*raft.Log) []interface{} {
	a.applying.Store(time.Now().UnixNano())
	defer a.applying.Store(0)
	out := make([]interface{}, len(logs))
	a.grants.lockApply()
	for i, l := range logs {
		out[i] = a.applyLocked(l)
	}
	a.watches.advancedLocked()
	a.grants.unlockAndYieldToGranted()
	return out
}

func (a *applier) applyLocked(l *raft.Log) interface{} {
	if a.stopped {
		return nil
	}
	res := a.table.Apply(l)
	switch r := res.(type) {
	case *fsm.Result:
		if r.Code == fsm.Unreadable {
			a.grants.haltLocked()
			a.halt(&fsm.FormatError{Level: uint64(r.Cmd.Level), Index: l.Index})
			return res
		}
		a.resultLocked(r)
	case []*fsm.Result:
		// A batch: each command as if it had an entry of its own, up to
		// a raise this build cannot read (a later build may batch one).
		for _, r := range r {
			if r.Code == fsm.Unreadable {
				a.grants.haltLocked()
				a.halt(&fsm.FormatError{Level: uint64(r.Cmd.Level), Index: l.Index})
				return res
			}
			a.resultLocked(r)
		}
	}
	return res
}

func (a *applier) resultLocked(r *fsm.Result) {
	if r.Cmd.Op == fsm.OpClusterID && r.Code == fsm.Recorded {
		a.id.record(r.Cmd.Key)
	}
	if r.Cmd.Op.IsSession() {
		a.grants.sessionAppliedLocked(r)
	}
	if r.Cmd.Op == fsm.OpTxn || r.Cmd.Op.IsSession() {
		// Each command of an applied transaction, and each release of a
		// session's end, as if it stood alone.
		for _, s := range r.Sub {
			a.resultLocked(s)
		}
		return
	}
	a.metrics.applied(r)
	a.grants.appliedLocked(r)
	a.watches.appliedLocked(r)
}

func (a *applier) Snapshot() (raft.FSMSnapshot, error) {
	if a.stopped {
		// The table is not what the log says up to the snapshot's index.
		return nil, errHalted
	}
	// Called on the FSM goroutine, so the position is the snapshot's.
	pos := a.table.Position()
	s, err := a.table.Snapshot()
	if err != nil {
		return nil, err
	}
	return &countedSnapshot{FSMSnapshot: s, a: a, pos: pos}, nil
}

// countedSnapshot records the snapshot's position as the last once it is
// saved, for the node's snapshotLoop and snapshotBeforeStop.
type countedSnapshot struct {
	raft.FSMSnapshot
	a   *applier
	pos uint64
}

func (s *countedSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.FSMSnapshot.Persist(sink); err != nil {
		return err
	}
	s.a.snapPos.Store(s.pos)
	return nil
}

func (a *applier) Restore(rc io.ReadCloser) error {
	if a.stopped {
		_ = rc.Close()
		return errHalted
	}
	var err error
	a.grants.locked(func() {
		if err = a.table.Restore(rc); err != nil {
			return
		}
		a.snapPos.Store(a.table.Position())
		a.grants.restoredLocked()
		a.watches.restoredLocked()
	})
	var fe *fsm.FormatError
	if errors.As(err, &fe) {
		a.grants.halt()
		a.halt(fe)
		return unreadable(fe)
	}
	if err != nil {
		return err
	}
	a.id.record(a.table.ClusterID())
	// A test may hold the applier here, between a restore and the entries
	// after it (faults_enabled.go).
	faultPoint(pointRestored, a.table)
	return nil
}
