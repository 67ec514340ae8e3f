package fsm

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/raft"
)

// snapshotMagic starts every snapshot; the byte after it is the version.
var snapshotMagic = []byte("FNCS")

// snapshotVersion 8 has the cluster's format level after the version byte
// (a table at level 0 writes version 7, which builds of level 0 read:
// snapshotVersionFor; its release memory may hold give-ups, token 0); 7
// ends with the cluster's ID; 6 remembers a release per
// owner of a key, not one per key (the same layout, a key may repeat); 5
// added shared keys' holders; 4 each key's session and the sessions
// section; 3 each key's kind, data and last write; 2 the members section.
// Versions 1 to 6 are still read (a cluster ID of "": its leader commits
// one). A version above it, or a level above FormatReadable, is a
// *FormatError.
const snapshotVersion byte = 8

// ErrBadSnapshot means a snapshot could not be read.
var ErrBadSnapshot = errors.New("fsm: malformed snapshot")

// keyedLease is a lease with its key, for snapshots.
type keyedLease struct {
	key string
	Lease
}

// rememberedRelease is a live release memory, for snapshots.
type rememberedRelease struct {
	key string
	released
}

// tableSnapshot is a point-in-time copy of the table. It implements
// raft.FSMSnapshot; the ordering and encoding happen in Persist, off the FSM
// goroutine.
type tableSnapshot struct {
	floor, lastIndex, maxToken uint64
	locks                      []keyedLease
	mem                        []rememberedRelease // in the order remembered
	members                    map[string]string
	sessions                   []SessionInfo
	clusterID                  string
	format                     uint64
}

// Snapshot copies the table. It is cheap relative to Persist: no sorting, no
// encoding.
func (t *Table) Snapshot() (raft.FSMSnapshot, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.snapshot(), nil
}

func (t *Table) snapshot() *tableSnapshot {
	s := &tableSnapshot{
		floor:     t.floor,
		lastIndex: t.lastIndex,
		maxToken:  t.maxToken,
		locks:     make([]keyedLease, 0, len(t.locks)),
		mem:       make([]rememberedRelease, 0, t.memCount),
		members:   make(map[string]string, len(t.members)),
		clusterID: t.clusterID,
		format:    t.format,
	}
	for id, addr := range t.members {
		s.members[id] = addr
	}
	for k, l := range t.locks {
		s.locks = append(s.locks, keyedLease{key: k, Lease: l.copy()})
	}
	for _, ss := range t.sessions {
		s.sessions = append(s.sessions, ss.info())
	}
	for _, ref := range t.memQueue {
		if i := t.live(ref); i >= 0 {
			s.mem = append(s.mem, rememberedRelease{key: ref.key, released: t.mem[ref.key][i]})
		}
	}
	return s
}

// Persist writes the snapshot to sink and closes it, or cancels it on error.
func (s *tableSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 256<<10)
	if err := s.writeTo(w); err != nil {
		_ = sink.Cancel()
		return err
	}
	if err := w.Flush(); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release is a no-op: the snapshot holds no resources.
func (s *tableSnapshot) Release() {}

// writeTo encodes the snapshot: magic, version (snapshotVersionFor the
// format level), from version 8 the level, then floor, last index, max token,
// the leases sorted by key, the remembered releases in the order they were
// remembered, the members' client addresses sorted by node ID, the sessions
// sorted by ID, then the cluster's ID. The same table always gives the same
// bytes.
func (s *tableSnapshot) writeTo(w io.Writer) error {
	slices.SortFunc(s.locks, func(a, b keyedLease) int { return strings.Compare(a.key, b.key) })
	buf := make([]byte, 0, 64<<10)
	buf = append(buf, snapshotMagic...)
	version := snapshotVersionFor(s.format)
	buf = append(buf, version)
	if version >= 8 {
		buf = binary.AppendUvarint(buf, s.format)
	}
	buf = binary.AppendUvarint(buf, s.floor)
	buf = binary.AppendUvarint(buf, s.lastIndex)
	buf = binary.AppendUvarint(buf, s.maxToken)
	buf = binary.AppendUvarint(buf, uint64(len(s.locks)))
	flush := func() error {
		if len(buf) < 48<<10 {
			return nil
		}
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	}
	for _, l := range s.locks {
		buf = appendString(buf, l.key)
		buf = append(buf, byte(l.Kind))
		buf = appendValue(buf, l.Owner)
		buf = appendValue(buf, l.Data)
		buf = binary.AppendUvarint(buf, l.Token)
		buf = binary.AppendUvarint(buf, l.TTL)
		buf = binary.AppendUvarint(buf, l.Version)
		buf = binary.AppendUvarint(buf, l.Mod)
		buf = binary.AppendUvarint(buf, l.Session)
		if l.Kind == KindShared {
			buf = appendShared(buf, l.Shared)
		}
		if err := flush(); err != nil {
			return err
		}
	}
	buf = binary.AppendUvarint(buf, uint64(len(s.mem)))
	for _, m := range s.mem {
		buf = appendString(buf, m.key)
		buf = appendString(buf, m.owner)
		buf = binary.AppendUvarint(buf, m.token)
		buf = binary.AppendUvarint(buf, m.pos)
		if err := flush(); err != nil {
			return err
		}
	}
	ids := make([]string, 0, len(s.members))
	for id := range s.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	buf = binary.AppendUvarint(buf, uint64(len(ids)))
	for _, id := range ids {
		buf = appendString(buf, id)
		buf = appendString(buf, s.members[id])
	}
	slices.SortFunc(s.sessions, func(a, b SessionInfo) int { return cmp.Compare(a.ID, b.ID) })
	buf = binary.AppendUvarint(buf, uint64(len(s.sessions)))
	for _, ss := range s.sessions {
		buf = binary.AppendUvarint(buf, ss.ID)
		buf = binary.AppendUvarint(buf, ss.TTL)
		buf = binary.AppendUvarint(buf, ss.Version)
		buf = binary.AppendUvarint(buf, ss.Taken)
		buf = appendString(buf, ss.User)
	}
	buf = appendString(buf, s.clusterID)
	_, err := w.Write(buf)
	return err
}

// Restore replaces the whole table with the snapshot read from rc.
func (t *Table) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("fsm: reading snapshot: %w", err)
	}
	n, err := decodeSnapshot(data, t.memWindow, t.memMax)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.locks, t.mem, t.memCount, t.memQueue, t.members, t.sessions = n.locks, n.mem, n.memCount, n.memQueue, n.members, n.sessions
	t.floor, t.lastIndex, t.maxToken = n.floor, n.lastIndex, n.maxToken
	t.clusterID, t.format = n.clusterID, n.format
	return nil
}

// MarshalSnapshot returns the table's snapshot bytes, the same bytes Persist
// writes. Two tables that applied the same log return equal bytes.
func (t *Table) MarshalSnapshot() []byte {
	var b bytes.Buffer
	_ = t.snapshotLocked().writeTo(&b)
	return b.Bytes()
}

func (t *Table) snapshotLocked() *tableSnapshot {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.snapshot()
}

// decodeLease reads one key's record as snapshot version writes it. Before
// version 3 every key was a lock: a string whose last write was its last
// grant or renewal.
func decodeLease(d *decoder, version byte) *Lease {
	if version < 3 {
		l := &Lease{Owner: d.string(), Token: d.uvarint(), TTL: d.uvarint(), Version: d.uvarint()}
		l.Mod = l.Version
		return l
	}
	l := &Lease{Kind: Kind(d.byte()), Owner: d.value(), Data: d.value()}
	l.Token, l.TTL, l.Version, l.Mod = d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint()
	if version >= 4 {
		l.Session = d.uvarint()
	}
	if version >= 5 && l.Kind == KindShared {
		l.Shared = decodeShared(d)
	}
	return l
}

// appendShared appends a shared key's permits and holders.
func appendShared(buf []byte, sh *Shared) []byte {
	buf = binary.AppendUvarint(buf, sh.Permits)
	buf = binary.AppendUvarint(buf, uint64(len(sh.Holders)))
	for _, h := range sh.Holders {
		buf = appendString(buf, h.Owner)
		buf = appendValue(buf, h.Data)
		buf = binary.AppendUvarint(buf, h.Token)
		buf = binary.AppendUvarint(buf, h.TTL)
		buf = binary.AppendUvarint(buf, h.Version)
		buf = binary.AppendUvarint(buf, h.Mod)
		buf = binary.AppendUvarint(buf, h.Session)
		buf = append(buf, byte(h.Mode))
		buf = binary.AppendUvarint(buf, h.Slot)
	}
	return buf
}

// decodeShared reads what appendShared wrote.
func decodeShared(d *decoder) *Shared {
	sh := &Shared{Permits: d.uvarint()}
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = ErrShortEntry
		return sh
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		h := &Holder{}
		h.Lease = Lease{Kind: KindShared, Owner: d.string(), Data: d.value()}
		h.Token, h.TTL, h.Version, h.Mod, h.Session = d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint()
		h.Mode, h.Slot = Mode(d.byte()), d.uvarint()
		sh.Holders = append(sh.Holders, h)
	}
	return sh
}

// validShared reports whether shared key l, restored at position pos with
// largest token maxToken, is one the table could have made: holders in
// increasing token order, of one kind (readers, or one writer alone, or
// permits in distinct slots below Permits), each with an owner and a TTL or
// a session, none later than pos.
func validShared(l *Lease, pos, maxToken uint64) bool {
	sh := l.Shared
	if sh == nil || len(sh.Holders) == 0 || l.Owner != "" || l.Data != "" || l.TTL != 0 || l.Session != 0 ||
		sh.Permits != 0 && uint64(len(sh.Holders)) > sh.Permits {
		return false
	}
	slots := make(map[uint64]bool)
	var last uint64
	for _, h := range sh.Holders {
		mode := h.Mode == ModeRead || h.Mode == ModeWrite && len(sh.Holders) == 1
		if sh.Permits != 0 {
			mode = h.Mode == ModePermit && h.Slot < sh.Permits && !slots[h.Slot]
			slots[h.Slot] = true
		}
		if !mode || h.Mode != ModePermit && h.Slot != 0 || h.Owner == "" || h.Token <= last || h.Token > maxToken ||
			h.Mod > pos || (h.Session != 0) == (h.TTL != 0) || h.Session == 0 && h.Data != "" {
			return false
		}
		last = h.Token
	}
	return true
}

func decodeSnapshot(data []byte, memWindow uint64, memMax int) (*Table, error) {
	if !bytes.HasPrefix(data, snapshotMagic) {
		return nil, fmt.Errorf("%w: bad magic", ErrBadSnapshot)
	}
	d := decoder{b: data[len(snapshotMagic):]}
	version := d.byte()
	if d.err == nil && version > snapshotVersion {
		return nil, &FormatError{SnapshotVersion: version}
	}
	if d.err == nil && version < 1 {
		return nil, fmt.Errorf("%w: unknown version %d", ErrBadSnapshot, version)
	}
	t := New()
	if version >= 8 {
		// The level comes first, so that a later level's snapshot is
		// refused for its level whatever follows it.
		t.format = d.uvarint()
		if d.err == nil && t.format > FormatReadable {
			return nil, &FormatError{SnapshotVersion: version, Level: t.format}
		}
		if d.err == nil && t.format == 0 {
			// A table at level 0 writes version 7: one table, one form.
			return nil, fmt.Errorf("%w: version %d at format level 0", ErrBadSnapshot, version)
		}
	}
	t.memWindow, t.memMax = memWindow, memMax
	t.floor = d.uvarint()
	t.lastIndex = d.uvarint()
	t.maxToken = d.uvarint()
	// Every token was a log position at or before the snapshot's: a larger
	// one would make the next grant fail to exceed it.
	if d.err == nil && (t.floor+t.lastIndex < t.floor || t.maxToken > t.floor+t.lastIndex) {
		return nil, fmt.Errorf("%w: largest token %d beyond position %d+%d", ErrBadSnapshot, t.maxToken, t.floor, t.lastIndex)
	}
	nLocks := d.uvarint()
	if d.err == nil && nLocks > uint64(len(d.b)) {
		return nil, fmt.Errorf("%w: %d leases in %d bytes", ErrBadSnapshot, nLocks, len(d.b))
	}
	if d.err == nil {
		// A lease takes at least 5 bytes, so this is bounded by the input.
		t.locks = make(map[string]*Lease, min(nLocks, uint64(len(d.b))/5))
	}
	for i := uint64(0); i < nLocks && d.err == nil; i++ {
		key := d.string()
		l := decodeLease(&d, version)
		if d.err == nil {
			if _, dup := t.locks[key]; dup || key == "" || l.Token > t.maxToken || l.Mod > t.floor+t.lastIndex ||
				l.Kind == KindShared && !validShared(l, t.floor+t.lastIndex, t.maxToken) ||
				!l.Kind.valid() && !(version >= 5 && l.Kind == KindShared) || version < 3 && l.Owner == "" || l.Kind == KindString && l.Data != "" && l.Session == 0 || l.Kind != KindString && l.Owner != "" ||
				l.Session != 0 && (l.Kind != KindString || l.TTL != 0) {
				return nil, fmt.Errorf("%w: bad lease for key %q", ErrBadSnapshot, key)
			}
			t.locks[key] = l
		}
	}
	nMem := d.uvarint()
	if d.err == nil && nMem > uint64(len(d.b)) {
		return nil, fmt.Errorf("%w: %d releases in %d bytes", ErrBadSnapshot, nMem, len(d.b))
	}
	for i := uint64(0); i < nMem && d.err == nil; i++ {
		key, owner := d.string(), d.string()
		m := released{owner: owner, token: d.uvarint(), pos: d.uvarint()}
		if d.err == nil {
			// Up to version 5 a key had one remembered release; from 6 one
			// per owner, in the order remembered.
			rs := t.mem[key]
			if findRelease(rs, owner) >= 0 || key == "" || version < 6 && len(rs) > 0 ||
				len(rs) > 0 && m.pos < rs[len(rs)-1].pos {
				return nil, fmt.Errorf("%w: bad release memory for key %q", ErrBadSnapshot, key)
			}
			t.remember(key, owner, m.token, m.pos)
		}
	}
	var nMembers uint64
	if version >= 2 {
		nMembers = d.uvarint()
	}
	if d.err == nil && nMembers > uint64(len(d.b)) {
		return nil, fmt.Errorf("%w: %d members in %d bytes", ErrBadSnapshot, nMembers, len(d.b))
	}
	for i := uint64(0); i < nMembers && d.err == nil; i++ {
		id, addr := d.string(), d.string()
		if d.err == nil {
			if _, dup := t.members[id]; dup || id == "" || addr == "" {
				return nil, fmt.Errorf("%w: bad member %q", ErrBadSnapshot, id)
			}
			t.members[id] = addr
		}
	}
	var nSessions uint64
	if version >= 4 {
		nSessions = d.uvarint()
	}
	if d.err == nil && nSessions > uint64(len(d.b)) {
		return nil, fmt.Errorf("%w: %d sessions in %d bytes", ErrBadSnapshot, nSessions, len(d.b))
	}
	for i := uint64(0); i < nSessions && d.err == nil; i++ {
		s := &Session{ID: d.uvarint(), TTL: d.uvarint(), Version: d.uvarint(), Taken: d.uvarint(), User: d.string(), keys: make(map[string]struct{})}
		if d.err == nil {
			if _, dup := t.sessions[s.ID]; dup || s.ID == 0 || s.TTL == 0 || s.Version < s.ID || s.Version > t.floor+t.lastIndex {
				return nil, fmt.Errorf("%w: bad session %d", ErrBadSnapshot, s.ID)
			}
			t.sessions[s.ID] = s
		}
	}
	if version >= 7 {
		t.clusterID = d.string()
	}
	for key, l := range t.locks {
		if l.Kind == KindShared && d.err == nil {
			for _, h := range l.Shared.Holders {
				if h.Session == 0 {
					continue
				}
				s := t.sessions[h.Session]
				if s == nil {
					return nil, fmt.Errorf("%w: key %q held under session %d, which is not open", ErrBadSnapshot, key, h.Session)
				}
				s.keys[key] = struct{}{}
			}
		}
		if l.Session == 0 || d.err != nil {
			continue
		}
		s := t.sessions[l.Session]
		if s == nil {
			return nil, fmt.Errorf("%w: key %q held under session %d, which is not open", ErrBadSnapshot, key, l.Session)
		}
		s.keys[key] = struct{}{}
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, d.err)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrBadSnapshot, len(d.b))
	}
	return t, nil
}
