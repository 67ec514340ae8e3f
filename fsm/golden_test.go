package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// updateGolden rewrites testdata/golden/*.txt from what this code encodes.
// Without it the golden tests only compare, and a missing file fails them:
// the recorded bytes are the log and snapshot formats every node already
// wrote, so they change only on purpose (go test ./fsm -run Golden
// -update-golden), and the diff is reviewed.
var updateGolden = flag.Bool("update-golden", false, "rewrite fsm/testdata/golden from the current encoders")

// goldenCommands is one command of every op and every flag combination that
// the decoder accepts for it (a flag combination it refuses has no command),
// with every field the flags bring set to a value that tells them apart, and
// the three entry forms that hold commands (batch, transaction, a
// transaction in a batch).
func goldenCommands() (names []string, entries [][]byte, cmds [][]Command) {
	ops := []Op{OpAcquire, OpExtend, OpRelease, OpExpire, OpRevoke, OpGrant, OpMember, OpPut,
		OpSessionOpen, OpSessionRenew, OpSessionClose, OpSessionExpire, OpSessionRevoke, OpProclaim, OpClusterID, OpFormat}
	add := func(name string, b []byte, cs []Command) {
		names, entries, cmds = append(names, name), append(entries, b), append(cmds, cs)
	}
	for _, op := range ops {
		for f := 0; f <= flagKnown; f++ {
			flags := byte(f)
			for vi, c := range goldenVariants(op, flags) {
				b := c.Encode(nil)
				if b[2] != flags {
					continue // the fields set do not make these flags
				}
				got, err := Decode(b)
				if err != nil {
					continue // a combination the decoder refuses
				}
				add(fmt.Sprintf("%s/flags=%#02x/%d", op, flags, vi), b, []Command{got})
			}
		}
	}
	acq := Command{Op: OpAcquire, Key: "k", Owner: "o", TTL: 1000}
	rel := Command{Op: OpRelease, Key: "j", Owner: "p", Waiter: &Waiter{Owner: "w", TTL: 300}}
	exp := Command{Op: OpExpire, Key: "x", Lease: &LeaseRef{Token: 300, Version: 1 << 40}}
	txn := Command{Op: OpTxn, Txn: &Txn{
		Guards: []Guard{{Key: "j", Mod: 4, Mem: 2}, {Key: "k"}},
		Scans:  []Scan{{Pattern: "*", Count: 3, Digest: 0x0123456789abcdef}, {Pattern: "k*", Count: 1, Digest: 42}},
		Cmds:   []Command{rel, acq, {Op: OpPut, Key: "s", Owner: "v", KeepTTL: true}},
	}}
	add("batch", JoinEntries(nil, [][]byte{acq.Encode(nil), rel.Encode(nil), exp.Encode(nil)}), []Command{acq, rel, exp})
	add("txn", txn.Encode(nil), []Command{txn})
	add("txn/bare", Command{Op: OpTxn, Txn: &Txn{Cmds: []Command{acq}}}.Encode(nil),
		[]Command{{Op: OpTxn, Txn: &Txn{Cmds: []Command{acq}}}})
	add("batch/with-txn", JoinEntries(nil, [][]byte{acq.Encode(nil), txn.Encode(nil)}), []Command{acq, txn})
	return names, entries, cmds
}

// goldenVariants builds op's commands that set exactly the parts flags name
// (the caller drops those whose encoding has other flags). A put has one
// variant for a string and one for another kind; a shared part one per
// mode.
func goldenVariants(op Op, flags byte) []Command {
	base := Command{Op: op, Key: "key", Owner: "owner", TTL: 30000}
	switch {
	case op.IsSession():
		base.Key, base.Owner, base.TTL = "", "", 0
		switch op {
		case OpSessionOpen:
			base.Owner, base.TTL = "user", 10000
		default:
			base.Session = 77
		}
	case op == OpExpire, op == OpGrant, op == OpRevoke, op == OpClusterID:
		base.Owner, base.TTL = "", 0
		if op == OpRevoke && flags&flagLease != 0 {
			base.Owner = "owner"
		}
	case op == OpMember:
		base.Owner, base.TTL = "127.0.0.1:7379", 0
	case op == OpFormat:
		if flags != 0 {
			return nil
		}
		// Level 1, and a level above FormatReadable: it decodes too.
		one := Command{Op: OpFormat, Level: 1}
		return []Command{one, {Op: OpFormat, Level: 200}}
	case op == OpProclaim:
		base.TTL = 0
	}
	set := func(c Command, mode Mode) Command {
		if flags&flagLease != 0 {
			c.Lease = &LeaseRef{Token: 1 << 33, Version: 1<<33 + 5}
		}
		if flags&flagWaiter != 0 {
			c.Waiter = &Waiter{Owner: "waiter", TTL: 2000}
		}
		if flags&flagRedis != 0 {
			c.Redis = true
		}
		if flags&flagKeep != 0 {
			c.KeepTTL = true
			c.TTL = 0
		}
		if flags&flagGiveUp != 0 {
			c.GiveUp = true
		}
		if flags&flagSession != 0 {
			switch {
			case op.IsSession():
				// The session itself is the part.
			case op == OpAcquire || op == OpProclaim:
				c.Session, c.TTL, c.Data = 9, 0, "value"
			default:
				c.Session, c.TTL = 9, 0
			}
			if c.Waiter != nil {
				c.Waiter.Session, c.Waiter.TTL, c.Waiter.Value = 11, 0, "waiter value"
			}
		}
		if flags&flagWaiters != 0 {
			c.Waiters = []KeyWaiter{
				{Key: "a", Waiter: Waiter{Owner: "wa", TTL: 500}},
				{Key: "b", Waiter: Waiter{Owner: "wb", Session: 12, Value: "vb"}},
			}
		}
		if flags&flagShared != 0 {
			permits := uint64(0)
			if mode == ModePermit {
				permits = 3
			}
			switch {
			case op == OpAcquire:
				c.Mode, c.Permits = mode, permits
			case c.Waiter != nil:
				c.Waiter.Mode, c.Waiter.Permits = mode, permits
			case len(c.Waiters) > 0:
				c.Waiters[1].Mode, c.Waiters[1].Permits = mode, permits
			}
		}
		return c
	}
	var out []Command
	modes := []Mode{ModeNone}
	if flags&flagShared != 0 {
		modes = []Mode{ModeRead, ModeWrite, ModePermit}
	}
	for _, m := range modes {
		if op == OpPut {
			s := set(base, m)
			s.Owner, s.Kind = "string value", KindString
			h := set(base, m)
			h.Owner, h.Kind, h.Data = "", KindHash, "\x00\x01hash data"
			out = append(out, s, h)
			continue
		}
		out = append(out, set(base, m))
	}
	return out
}

// goldenSnapshots is a snapshot of every version: the current one as
// MarshalSnapshot writes it, of a table holding every kind of record, and
// each older one as legacySnapshot writes it from a table holding what
// that version could.
func goldenSnapshots(t *testing.T) (names []string, snaps [][]byte) {
	full := newApplier()
	for _, c := range []Command{
		{Op: OpClusterID, Key: "cluster-1"},
		{Op: OpMember, Key: "n1", Owner: "127.0.0.1:7379"},
		{Op: OpMember, Key: "n2", Owner: "127.0.0.1:7380"},
		acquire("lock", "holder", 5000),
		acquire("gone", "a", 5000),
		release("gone", "a"),
		acquire("gone", "b", 5000),
		release("gone", "b"),
		{Op: OpPut, Key: "str", Owner: "plain value", TTL: 9000},
		{Op: OpPut, Key: "hash", Kind: KindHash, Data: "\x00\x01field"},
		{Op: OpAcquire, Key: "rw", Owner: "r1", TTL: 4000, Mode: ModeRead},
		{Op: OpAcquire, Key: "rw", Owner: "r2", TTL: 4000, Mode: ModeRead},
		{Op: OpAcquire, Key: "sem", Owner: "p1", TTL: 4000, Mode: ModePermit, Permits: 2},
		{Op: OpSessionOpen, Owner: "user", TTL: 10000},
	} {
		r := full.apply(t, c)
		require.NotEqual(t, Conflict, r.Code, "%+v", c)
	}
	sid := full.index
	full.apply(t, Command{Op: OpAcquire, Key: "elected", Owner: "leader", Session: sid, Data: "leader's value"})
	full.apply(t, Command{Op: OpAcquire, Key: "sem", Owner: "p2", Session: sid, Mode: ModePermit, Permits: 2})
	full.apply(t, Command{Op: OpSessionRenew, Session: sid})
	// At format level 0 a table writes version 7.
	names = append(names, "v7")
	snaps = append(snaps, full.t.MarshalSnapshot())

	plain := newApplier()
	for _, c := range []Command{
		{Op: OpMember, Key: "n1", Owner: "127.0.0.1:7379"},
		acquire("lock", "holder", 5000),
		acquire("gone", "a", 5000),
		release("gone", "a"),
		acquire("other", "c", 5000),
		release("other", "c"),
	} {
		plain.apply(t, c)
	}
	for v := byte(1); v < 7; v++ {
		tb := plain.t
		if v >= 3 {
			tb = full.t
		}
		names = append(names, fmt.Sprintf("v%d", v))
		snaps = append(snaps, legacySnapshot(v, tb))
	}

	// Version 8: the same table raised to level 1, with a give-up (token 0).
	full.apply(t, Command{Op: OpFormat, Level: 1})
	full.apply(t, Command{Op: OpRelease, Key: "lock", Owner: "quitter", GiveUp: true})
	names = append(names, fmt.Sprintf("v%d", snapshotVersion))
	snaps = append(snaps, full.t.MarshalSnapshot())
	return names, snaps
}

// legacySnapshot writes tb in the layout of snapshot version v (the
// history in snapshotVersion's comment), leaving out what that version
// cannot hold: kinds before 3, sessions and session holders before 4,
// shared keys before 5, a second release of a key before 6, the cluster ID
// before 7.
func legacySnapshot(v byte, tb *Table) []byte {
	s := tb.snapshotLocked()
	slices.SortFunc(s.locks, func(a, b keyedLease) int { return strings.Compare(a.key, b.key) })
	var locks []keyedLease
	for _, l := range s.locks {
		if v < 3 && l.Kind != KindString || v < 4 && l.Session != 0 || v < 5 && l.Kind == KindShared {
			continue
		}
		if v < 4 && l.Kind == KindString && l.Data != "" {
			continue
		}
		locks = append(locks, l)
	}
	var mem []rememberedRelease
	seen := map[string]bool{}
	for _, m := range s.mem {
		if v < 6 && seen[m.key] {
			continue
		}
		seen[m.key] = true
		mem = append(mem, m)
	}
	b := append([]byte(nil), snapshotMagic...)
	b = append(b, v)
	b = binary.AppendUvarint(b, s.floor)
	b = binary.AppendUvarint(b, s.lastIndex)
	b = binary.AppendUvarint(b, s.maxToken)
	b = binary.AppendUvarint(b, uint64(len(locks)))
	for _, l := range locks {
		b = appendString(b, l.key)
		if v < 3 {
			b = appendString(b, l.Owner)
			b = binary.AppendUvarint(b, l.Token)
			b = binary.AppendUvarint(b, l.TTL)
			b = binary.AppendUvarint(b, l.Version)
			continue
		}
		b = append(b, byte(l.Kind))
		b = appendValue(b, l.Owner)
		b = appendValue(b, l.Data)
		b = binary.AppendUvarint(b, l.Token)
		b = binary.AppendUvarint(b, l.TTL)
		b = binary.AppendUvarint(b, l.Version)
		b = binary.AppendUvarint(b, l.Mod)
		if v >= 4 {
			b = binary.AppendUvarint(b, l.Session)
		}
		if v >= 5 && l.Kind == KindShared {
			b = appendShared(b, l.Shared)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(mem)))
	for _, m := range mem {
		b = appendString(b, m.key)
		b = appendString(b, m.owner)
		b = binary.AppendUvarint(b, m.token)
		b = binary.AppendUvarint(b, m.pos)
	}
	if v >= 2 {
		ids := make([]string, 0, len(s.members))
		for id := range s.members {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		b = binary.AppendUvarint(b, uint64(len(ids)))
		for _, id := range ids {
			b = appendString(b, id)
			b = appendString(b, s.members[id])
		}
	}
	if v >= 4 {
		b = binary.AppendUvarint(b, uint64(len(s.sessions)))
		slices.SortFunc(s.sessions, func(a, b SessionInfo) int { return int(a.ID) - int(b.ID) })
		for _, ss := range s.sessions {
			b = binary.AppendUvarint(b, ss.ID)
			b = binary.AppendUvarint(b, ss.TTL)
			b = binary.AppendUvarint(b, ss.Version)
			b = binary.AppendUvarint(b, ss.Taken)
			b = appendString(b, ss.User)
		}
	}
	return b
}

// TestGoldenEntries encodes one command of every op and flag combination,
// and each entry form, and compares the bytes with those recorded from the
// encoder before the layout was written once (testdata/golden/entries.txt).
// Each recorded entry must also decode to the command it was made from, and
// its length must be what the transaction form counts (encodedLen).
func TestGoldenEntries(t *testing.T) {
	names, entries, cmds := goldenCommands()
	require.Greater(t, len(names), 60, "every op and flag combination")
	lines := make([]string, len(names))
	for i, name := range names {
		lines[i] = name + " " + hex.EncodeToString(entries[i])
		got, err := DecodeEntry(entries[i])
		require.NoError(t, err, name)
		assert.Equal(t, cmds[i], got, name)
		for _, c := range got {
			if c.Op != OpTxn {
				assert.Equal(t, len(c.Encode(nil)), c.encodedLen(), "%s: encodedLen", name)
			} else {
				assert.Equal(t, len(c.Encode(nil)), c.Txn.Size(), "%s: Txn.Size", name)
			}
		}
	}
	compareGolden(t, "entries.txt", lines)
}

// TestGoldenSnapshots restores a snapshot of every version and compares the
// input and what the table marshals to (the current version) with the bytes
// recorded before the refactor (testdata/golden/snapshots.txt).
func TestGoldenSnapshots(t *testing.T) {
	names, snaps := goldenSnapshots(t)
	var lines []string
	for i, name := range names {
		tb := New()
		require.NoError(t, tb.Restore(io.NopCloser(bytes.NewReader(snaps[i]))), name)
		lines = append(lines, name+" "+hex.EncodeToString(snaps[i]))
		lines = append(lines, name+"/restored "+hex.EncodeToString(tb.MarshalSnapshot()))
	}
	compareGolden(t, "snapshots.txt", lines)
}

// TestFuzzCorporaStillDecode reads every checked-in fuzz input of FuzzDecode
// and FuzzSnapshot and records whether it decodes and to what (re-encoded),
// so that a refactor that changes what an old input means shows up
// (testdata/golden/corpora.txt).
func TestFuzzCorporaStillDecode(t *testing.T) {
	var lines []string
	for _, target := range []string{"FuzzDecode", "FuzzSnapshot"} {
		files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
		require.NoError(t, err)
		require.NotEmpty(t, files, target)
		slices.Sort(files)
		for _, f := range files {
			in := readCorpusBytes(t, f)
			name := target + "/" + filepath.Base(f)
			var out string
			if target == "FuzzDecode" {
				cmds, err := DecodeEntry(in)
				out = "error: " + fmt.Sprint(err)
				if err == nil {
					out = "ok " + hex.EncodeToString(EncodeEntry(nil, cmds))
				}
			} else {
				tb := New()
				err := tb.Restore(io.NopCloser(bytes.NewReader(in)))
				out = "error: " + fmt.Sprint(err)
				if err == nil {
					out = "ok " + hex.EncodeToString(tb.MarshalSnapshot())
				}
			}
			lines = append(lines, name+" "+out)
		}
	}
	compareGolden(t, "corpora.txt", lines)
}

// readCorpusBytes reads a "go test fuzz v1" file holding one []byte.
func readCorpusBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)
	require.Len(t, lines, 2, path)
	require.Equal(t, "go test fuzz v1", lines[0], path)
	lit, ok := strings.CutPrefix(lines[1], "[]byte(")
	require.True(t, ok, path)
	lit, ok = strings.CutSuffix(lit, ")")
	require.True(t, ok, path)
	s, err := strconv.Unquote(lit)
	require.NoError(t, err, path)
	return []byte(s)
}

// compareGolden compares lines with testdata/golden/name, or rewrites it
// under -update-golden.
func compareGolden(t *testing.T, name string, lines []string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *updateGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
		t.Logf("rewrote %s (%d lines)", path, len(lines))
		return
	}
	f, err := os.Open(path)
	require.NoError(t, err, "the recorded bytes are missing; -update-golden writes them, on purpose only")
	defer f.Close()
	want := map[string]string{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, val, _ := strings.Cut(sc.Text(), " ")
		want[name] = val
		order = append(order, name)
	}
	require.NoError(t, sc.Err())
	got := map[string]string{}
	for _, l := range lines {
		name, val, _ := strings.Cut(l, " ")
		got[name] = val
		if w, ok := want[name]; !ok {
			t.Errorf("%s: not recorded (a new case: record it with -update-golden)", name)
		} else if w != val {
			t.Errorf("%s: bytes differ from the recorded ones\n got: %s\nwant: %s", name, val, w)
		}
	}
	for _, name := range order {
		if _, ok := got[name]; !ok {
			t.Errorf("%s: recorded but no longer produced", name)
		}
	}
}
