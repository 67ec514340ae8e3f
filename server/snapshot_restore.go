package server

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
)

// SnapshotTable returns the lock table's snapshot bytes (fsm's format, as
// fsm.Table.MarshalSnapshot writes them) as the leader has them once it has
// confirmed with a quorum that it still leads: they hold every write
// acknowledged before the call. It runs on the leader; elsewhere it returns
// a *NotLeaderError. RestoreSnapshot seeds a new cluster from them.
func (n *Node) SnapshotTable(ctx context.Context) ([]byte, error) {
	if err := n.verifyLeader(ctx); err != nil {
		return nil, err
	}
	return n.table.MarshalSnapshot(), nil
}

// RestoreSnapshot makes this node's lock table the one in snapshot (bytes
// from SnapshotTable) and returns what it restored. It is meant for a node
// that just bootstrapped a new one-node cluster on an empty data directory
// (fencerd --restore), before it serves anyone: a node that opened with
// existing state, or that waits to join, gets ErrRestoreNotNew, and so does
// one whose table is not empty.
//
// The restored table keeps every lease with its token; its token floor is
// raised past the old cluster's last position, so every token this cluster
// issues is larger than every token in the snapshot (fsm.ForNewCluster). As
// after any snapshot restore, the leader restarts every restored lease at its
// full TTL from now. Raft stores the table as a snapshot, which new members
// receive when they join.
func (n *Node) RestoreSnapshot(ctx context.Context, snapshot []byte) (fsm.SnapshotInfo, error) {
	if n.hadState || n.cfg.Join {
		return fsm.SnapshotInfo{}, fmt.Errorf("%w: the data directory had state, or the node waits to join", ErrRestoreNotNew)
	}
	data, info, err := fsm.ForNewCluster(snapshot)
	if err != nil {
		return fsm.SnapshotInfo{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if err := n.waitReady(ctx); err != nil {
		return fsm.SnapshotInfo{}, err
	}
	if l := n.table.Len(); l != 0 {
		return fsm.SnapshotInfo{}, fmt.Errorf("%w: the table already holds %d locks", ErrRestoreNotNew, l)
	}
	timeout := 30 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: int64(len(data))}
	if err := n.raft.Restore(meta, bytes.NewReader(data), timeout); err != nil {
		return fsm.SnapshotInfo{}, n.translate(err)
	}
	// The old cluster's members were dropped; record this node's address.
	if _, err := n.propose(ctx, fsm.Command{Op: fsm.OpMember, Key: n.id, Owner: n.cfg.ClientAddr}); err != nil {
		return info, err
	}
	// It is a cluster of its own: the snapshot's ID was dropped.
	id, err := newClusterID()
	if err != nil {
		return info, err
	}
	if _, err := n.propose(ctx, fsm.Command{Op: fsm.OpClusterID, Key: id}); err != nil {
		return info, err
	}
	n.log.Info("restored a snapshot into a new cluster", "cluster_id", id, "locks", info.Locks, "max_token", info.MaxToken, "floor", info.Floor)
	return info, nil
}
