package fsm

import "fmt"

// Format levels. A cluster's members may run different builds while it is
// upgraded one node at a time, so what the leader writes (an entry, a flag,
// a snapshot version) must be something every member can read. Each format
// change that an older build cannot read raises the level; the cluster's
// level is replicated state (OpFormat, kept in snapshots from version 8),
// so every node applies the same level at the same position. The leader
// commits a raise only once every member of its configuration has told it
// that it reads that level (server: the member-health probe), and a server
// that cannot read the level in use is refused membership. Writers consult
// Table.Format before using a format of a higher level.
//
//	0  the formats of the first builds with a cluster ID (snapshot
//	   version 7): every entry op up to OpClusterID, no give-up flag
//	1  Command.GiveUp (flagGiveUp) and the releases it remembers with
//	   token 0; OpFormat; snapshot version 8, which records the level
//
// A node that applies an OpFormat naming a level above FormatReadable, or
// restores a snapshot of a version or level it cannot read, gets a
// *FormatError: it must stop rather than misread what follows. That holds
// for a raise in an entry of its own or in a batch (Apply stops the batch
// there); a transaction may not hold one (this build fails to decode it),
// so a later build must never write its raise inside a transaction.

// FormatReadable is the highest format level this build reads (and can
// write).
const FormatReadable uint64 = 1

// snapshotVersionFor is the snapshot version a table at format level
// writes: version 7 at level 0, as the builds of level 0 read it.
func snapshotVersionFor(level uint64) byte {
	if level == 0 {
		return 7
	}
	return 8
}

// FormatError means the cluster's data is in a format this build cannot
// read: an OpFormat above FormatReadable (Level) or a snapshot of an
// unknown version (SnapshotVersion, Level then 0 if it is not known) or of
// a level above FormatReadable.
type FormatError struct {
	// Level is the format level the data needs; 0 when only its snapshot
	// version is known.
	Level uint64
	// SnapshotVersion is the version of the snapshot refused; 0 for an
	// entry.
	SnapshotVersion byte
	// Index is the Raft index of the entry refused; 0 for a snapshot.
	Index uint64
}

func (e *FormatError) Error() string {
	what := fmt.Sprintf("the log entry at index %d raises the cluster's format level to %d", e.Index, e.Level)
	switch {
	case e.SnapshotVersion != 0 && e.Level != 0:
		what = fmt.Sprintf("the snapshot (version %d) is at format level %d", e.SnapshotVersion, e.Level)
	case e.SnapshotVersion != 0:
		what = fmt.Sprintf("the snapshot is of version %d (this build reads versions up to %d), written by a build of a higher format level", e.SnapshotVersion, snapshotVersion)
	}
	return fmt.Sprintf("fsm: %s, and this build reads format levels up to %d", what, FormatReadable)
}

// Readable reports whether this build reads what e names (a FormatError
// recorded by another build).
func (e *FormatError) Readable() bool {
	return e.Level <= FormatReadable && e.SnapshotVersion <= snapshotVersion
}

// Format returns the cluster's format level, as applied.
func (t *Table) Format() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.format
}

// applyFormat raises the format level. A level this build cannot read
// leaves the table unchanged and answers Unreadable: the node must stop
// before it applies anything written at that level.
func (t *Table) applyFormat(r *Result, c *Command) {
	switch {
	case uint64(c.Level) > FormatReadable:
		r.Code = Unreadable
	case uint64(c.Level) <= t.format:
		r.Code = Stale
	default:
		t.format = uint64(c.Level)
		r.Code = Recorded
	}
}
