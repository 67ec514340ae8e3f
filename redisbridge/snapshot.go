package redisbridge

import "context"

// tableSnapshotter is what FENCE.SNAPSHOT needs of the node (*server.Node);
// it is not part of Locker, so other Lockers need not implement it.
type tableSnapshotter interface {
	SnapshotTable(ctx context.Context) ([]byte, error)
}

// snapshot: FENCE.SNAPSHOT → the lock table's snapshot bytes, as one bulk
// reply, from the leader once it has confirmed it leads (forwarded there like
// a read). fencer snapshot save writes them to a file; fencerd --restore
// seeds a new cluster from it.
func (b *Bridge) snapshot(r *request) {
	s, ok := b.locker.(tableSnapshotter)
	if !ok {
		writeError(r.c, errf("this server cannot snapshot its table"))
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	data, err := s.SnapshotTable(ctx)
	if err != nil {
		b.fail(ctx, r, err)
		return
	}
	r.c.WriteBulk(data)
}
