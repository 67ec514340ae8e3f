package fsm

// SnapshotInfo summarises a snapshot's contents.
type SnapshotInfo struct {
	// Locks is the number of held leases.
	Locks int
	// MaxToken is the largest token the snapshot's cluster had issued.
	MaxToken uint64
	// Floor is the token floor of the table ForNewCluster returns: every
	// token the new cluster issues is Floor plus a Raft index, so larger.
	Floor uint64
}

// ForNewCluster turns snapshot bytes (Persist's or MarshalSnapshot's) of one
// cluster into the bytes of a table that seeds a new cluster, whose Raft log
// starts again from index 1. It keeps the leases with their tokens and
// versions, and the remembered releases, and raises the floor to the old
// cluster's last position (its floor plus its last applied index, which is
// at least the largest token it issued), with the last applied index reset
// to zero: every token the new cluster issues is floor + index > every token
// in the snapshot (DESIGN.md invariant 1), and positions keep growing, so
// release memory is forgotten as it would have been. The old cluster's
// members' client addresses and its ID are dropped: the new cluster records
// its own.
// Bytes that are not a valid snapshot give ErrBadSnapshot.
func ForNewCluster(snapshot []byte) ([]byte, SnapshotInfo, error) {
	t, err := decodeSnapshot(snapshot, ReleaseMemoryWindow, ReleaseMemoryMax)
	if err != nil {
		return nil, SnapshotInfo{}, err
	}
	t.floor = max(t.floor+t.lastIndex, t.maxToken)
	t.lastIndex = 0
	t.members = make(map[string]string)
	t.clusterID = "" // a cluster of its own: its leader commits a new ID
	return t.MarshalSnapshot(), SnapshotInfo{Locks: len(t.locks), MaxToken: t.maxToken, Floor: t.floor}, nil
}
