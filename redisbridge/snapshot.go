package redisbridge

import "context"

// snapshotNode is what FENCE.SNAPSHOT needs of the node.
type snapshotNode interface {
	SnapshotTable(ctx context.Context) ([]byte, error)
}

// snapshot: FENCE.SNAPSHOT → the lock table's snapshot bytes, as one bulk
// reply, from the leader once it has confirmed it leads (forwarded there like
// a read). fencer snapshot save writes them to a file; fencerd --restore
// seeds a new cluster from it.
func (b *Bridge) snapshot(r *request) {
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	data, err := b.locker.SnapshotTable(ctx)
	if err != nil {
		b.fail(ctx, r, err)
		return
	}
	r.c.WriteBulk(data)
}
