package server

import (
	"errors"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
)

// The node's background loops, each started by Open and stopped by Close
// (stopCh, wg).

// watchLeadership makes the node ready when it becomes leader: it first
// applies its whole log (Barrier), then restarts every lease at its full TTL.
//
// Raft's leader channel holds one value and overwrites it, so a step-down
// followed by a re-election can arrive as a single true. Readiness therefore
// follows the term, not the last value seen: a true clears readiness (and
// answers the waiters of any earlier term) before the Barrier, and the node
// becomes ready only if it still leads in the term the Barrier ran in.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stopCh:
			return
		case isLeader := <-n.raft.LeaderCh():
			if faultPoint(pointLeaderCh, leaderNotice{n.id, isLeader}) {
				continue // a test drops this notification, as raft may
			}
			n.grants.notReady()
			if !isLeader {
				n.log.Info("lost leadership")
				continue
			}
			term := n.raft.CurrentTerm()
			// Barrier with no timeout: it returns once every earlier entry
			// is applied, or with an error if leadership is lost.
			if err := n.raft.Barrier(0).Error(); err != nil {
				n.log.Warn("barrier after election failed", "err", err)
				continue
			}
			n.commitClusterID()
			if !n.recordVoters(term) {
				continue // leadership lost: the next leader records them
			}
			// A leader alone, or of members that all told it already,
			// raises the format level before it serves anything.
			n.raiseFormat(term)
			if n.grants.becomeReady(term, !faultActive(faultSkipLeaseRestart)) {
				n.log.Info("leader ready", "term", term, "locks", n.table.Len(), "applied_index", n.raft.AppliedIndex())
			}
			n.kick()
			if n.table.Members()[n.id] != n.cfg.ClientAddr && !n.table.Removed(n.id) {
				n.proposeAsync(fsm.Command{Op: fsm.OpMember, Key: n.id, Owner: n.cfg.ClientAddr})
			}
		}
	}
}

// leaderNotice is what the leader-ch fault point is told: which node's
// watcher received which value.
type leaderNotice struct {
	id     string
	leader bool
}

// kick wakes the expiry loop.
func (n *Node) kick() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// expireLoop proposes an Expire for every lease whose deadline passed, while
// this node is a ready leader.
func (n *Node) expireLoop() {
	defer n.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var probes []chan struct{}
	for {
		due, wait := n.grants.due()
		if len(due) > 0 {
			go n.proposeExpires(due)
		}
		// A liveness probe (Live) is answered once a round has run.
		for _, p := range probes {
			close(p)
		}
		probes = probes[:0]
		timer.Reset(wait)
		select {
		case <-n.stopCh:
			return
		case p := <-n.probe:
			probes = append(probes, p)
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		case <-n.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// proposeExpires commits Expire entries; one that fails is retried while the
// node is still a ready leader.
func (n *Node) proposeExpires(cmds []fsm.Command) {
	// A test may hold the expiries here, after their leases ran out on
	// the leader and before their entry (faults_enabled.go).
	faultPoint(pointProposeExpires, cmds)
	errs := make([]chan error, len(cmds))
	for i, c := range cmds {
		faultPoint(pointExpirePropose, &c)
		ch := make(chan error, 1)
		errs[i] = ch
		n.batch.submit(c.Encode(nil), func(_ *fsm.Result, err error) { ch <- err })
	}
	retry := false
	for i, ch := range errs {
		if err := <-ch; err != nil {
			n.grants.retryExpire(cmds[i])
			retry = true
			n.log.Debug("expire not committed", "key", cmds[i].Key, "err", err)
		}
	}
	if retry {
		select {
		case <-n.stopCh:
		case <-time.After(50 * time.Millisecond):
			n.kick()
		}
	}
}

// snapshotLoop takes a snapshot once SnapshotThreshold commands were applied
// since the last one, checked every SnapshotInterval. Raft's own threshold
// counts entries, and an entry may hold a batch of up to MaxBatch commands,
// whose replay after a crash takes as long as that many entries would.
func (n *Node) snapshotLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(n.cfg.SnapshotInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.stopCh:
			return
		case <-tick.C:
		}
		if n.table.Position() < n.fsm.snapPos.Load()+n.cfg.SnapshotThreshold {
			continue
		}
		if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			n.log.Warn("snapshot by command count failed", "err", err)
		}
	}
}

// watchLeaderChanges counts leader changes until the node stops.
func (n *Node) watchLeaderChanges() {
	defer n.wg.Done()
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	for {
		select {
		case <-n.stopCh:
			return
		case <-ch:
			n.metrics.leaderChanges.Inc()
		}
	}
}
