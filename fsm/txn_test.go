package fsm

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockState is what a transaction may change: the leases and the release
// memory (without the log position, which every entry moves).
func lockState(t *Table) map[string]any {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := map[string]any{}
	for k, l := range t.locks {
		out["lock "+k] = *l
	}
	for k, m := range t.mem {
		out["mem "+k] = m
	}
	return out
}

func txnOf(guards []Guard, cmds ...Command) Command {
	return Command{Op: OpTxn, Txn: &Txn{Guards: guards, Cmds: cmds}}
}

func TestTxnEncodeDecodeRoundTrip(t *testing.T) {
	tx := txnOf([]Guard{{Key: "a", Mod: 7, Mem: 3}, {Key: "b"}},
		release("a", "o"), Command{Op: OpRevoke, Key: "b", Waiter: &Waiter{Owner: "w", TTL: 9}}, acquire("b", "p", 100))
	b := tx.Encode(nil)
	assert.Equal(t, TxnVersion, b[0])
	assert.Equal(t, len(b), tx.Txn.Size())
	got, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, tx, got)

	batch := []Command{acquire("k", "o", 1), tx}
	cmds, err := DecodeEntry(EncodeEntry(nil, batch))
	require.NoError(t, err)
	assert.Equal(t, batch, cmds, "a transaction may be one command of a batch")
	cmds, err = DecodeEntry(b)
	require.NoError(t, err)
	assert.Equal(t, []Command{tx}, cmds)
}

func TestTxnDecodeRejects(t *testing.T) {
	ok := []Guard{{Key: "a"}, {Key: "b"}}
	tests := map[string]Command{
		"no commands":        txnOf(ok),
		"guards unordered":   txnOf([]Guard{{Key: "b"}, {Key: "a"}}, release("a", "o")),
		"guard twice":        txnOf([]Guard{{Key: "a"}, {Key: "a"}}, release("a", "o")),
		"empty guard key":    txnOf([]Guard{{Key: ""}}, release("a", "o")),
		"member in a txn":    txnOf(ok, Command{Op: OpMember, Key: "n1", Owner: "addr"}),
		"bad command":        txnOf(ok, acquire("", "o", 1)),
		"txn inside a txn":   txnOf(ok, txnOf(ok, release("a", "o"))),
		"batch inside a txn": {Op: OpTxn, Txn: &Txn{Cmds: []Command{release("a", "o")}}},
	}
	for name, c := range tests {
		t.Run(name, func(t *testing.T) {
			b := c.Encode(nil)
			if name == "batch inside a txn" {
				// Replace the one command by a batch of two.
				inner := EncodeEntry(nil, []Command{release("a", "o"), release("b", "o")})
				b = append([]byte{TxnVersion, 0, 0, 1, byte(len(inner))}, inner...)
			}
			_, err := Decode(b)
			assert.ErrorIs(t, err, ErrBadEntry)
		})
	}
	valid := txnOf(ok, release("a", "o")).Encode(nil)
	_, err := Decode(append(valid, 0))
	assert.ErrorIs(t, err, ErrBadEntry, "trailing bytes")
	_, err = Decode(valid[:len(valid)-1])
	assert.ErrorIs(t, err, ErrShortEntry, "truncated")
}

// Each check of the transaction form refuses with its own reason, at the
// point the decoder reads the field it checks (so a later truncation does
// not hide it).
func TestTxnDecodeReasons(t *testing.T) {
	rel := release("a", "o").Encode(nil)
	cmd := append([]byte{byte(len(rel))}, rel...)
	txn := func(parts ...[]byte) []byte {
		b := []byte{TxnVersion}
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	guard := func(k string) []byte { return append(append([]byte{byte(len(k))}, k...), 5, 0) }
	scan := func(p string) []byte {
		return append(append([]byte{byte(len(p))}, p...), 1, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	session := Command{Op: OpAcquire, Key: "a", Owner: "o", Session: 3}.Encode(nil)
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"guards beyond the bytes", txn([]byte{3}, guard("a"), guard("b")), "fsm: malformed entry: 3 guards in 8 bytes"},
		{"guards unordered, then cut short", txn([]byte{3}, guard("b"), guard("a"), []byte{1, 0, 0, 0, 0}), "fsm: malformed entry: txn guards not in increasing key order"},
		{"empty guard key", txn([]byte{1, 0, 0, 0}, []byte{0}, cmd), "fsm: malformed entry: txn guards not in increasing key order"},
		{"scans beyond the bytes", txn([]byte{0, 2}, scan("a")), "fsm: malformed entry: 2 scans in 11 bytes"},
		{"scans unordered", txn([]byte{0, 2}, scan("b"), scan("a"), []byte{1}, cmd), "fsm: malformed entry: txn scans not in increasing pattern order"},
		{"commands beyond the bytes", txn([]byte{0, 0, 2}, cmd), fmt.Sprintf("fsm: malformed entry: txn of 2 commands in %d bytes", len(cmd))},
		{"no commands", txn([]byte{1}, guard("a"), []byte{0, 0}), "fsm: malformed entry: txn without commands"},
		{"empty command", txn([]byte{0, 0, 1, 0}, cmd), "fsm: malformed entry: command 0 of a txn is not a plain command"},
		{"command longer than the entry", txn([]byte{0, 0, 1, byte(len(rel) + 1)}, rel), "fsm: entry is truncated"},
		{"session command", txn([]byte{0, 0, 1, byte(len(session))}, session), "fsm: malformed entry: member, cluster ID or session command in a txn"},
		{"bad second command", txn([]byte{0, 0, 2}, cmd, []byte{8, EncodingVersion, 99, 0, 1, 'a', 1, 'o', 1}), "command 1 of the txn: fsm: malformed entry: unknown op 99"},
		{"trailing", txn([]byte{0, 0, 1}, cmd, []byte{7}), "fsm: malformed entry: 1 trailing bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.b)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}

// A transaction whose guards hold applies every command at one position: the
// grants share the token, the outcomes are the draft's, and the table is what
// the draft worked out.
func TestTxnAppliesAtOnePositionAsDrafted(t *testing.T) {
	a := newApplier()
	a.apply(t, acquire("x", "h", 1000))
	a.apply(t, acquire("y", "h", 1000))
	a.apply(t, release("z", "o")) // nothing held: not remembered either

	d := a.t.Draft()
	r, err := d.Apply(Command{Op: OpRelease, Key: "x", Owner: "h", Redis: true})
	require.NoError(t, err)
	assert.Equal(t, Released, r.Code)
	r, err = d.Apply(Command{Op: OpAcquire, Key: "x", Owner: "n", TTL: 500, Redis: true})
	require.NoError(t, err)
	assert.Equal(t, Granted, r.Code)
	r, err = d.Apply(acquire("z", "n", 500))
	require.NoError(t, err)
	assert.Equal(t, Granted, r.Code)
	l, held := d.Get("y")
	require.True(t, held)
	assert.Equal(t, "h", l.Owner, "a key only read is a guard too")
	txn, ok := d.Txn()
	require.True(t, ok)
	assert.Equal(t, []string{"x", "y", "z"}, []string{txn.Txn.Guards[0].Key, txn.Txn.Guards[1].Key, txn.Txn.Guards[2].Key})

	res := a.apply(t, txn)
	require.Equal(t, Applied, res.Code)
	require.True(t, d.Same(res))
	x, _ := a.t.Get("x")
	z, _ := a.t.Get("z")
	assert.Equal(t, res.Position, x.Token)
	assert.Equal(t, x.Token, z.Token, "one entry's grants share its token")
	assert.Equal(t, "n", x.Owner)
	require.NotNil(t, res.Sub[0].Freed)

	g := a.apply(t, acquire("w", "o", 1))
	assert.Greater(t, g.Lease.Token, x.Token, "the next grant's token is larger")
}

// A change to any key the draft read, between the draft and the entry, makes
// the whole transaction a Conflict that changes nothing.
func TestTxnConflictChangesNothing(t *testing.T) {
	for name, meddle := range map[string]Command{
		"lease renewed":       extend("x", "h", 2000),
		"released":            release("x", "h"),
		"read-only key taken": acquire("free", "o", 10),
		"release remembered":  release("gone", "g"),
	} {
		t.Run(name, func(t *testing.T) {
			a := newApplier()
			a.apply(t, acquire("x", "h", 1000))
			a.apply(t, acquire("gone", "g", 1000))
			d := a.t.Draft()
			_, err := d.Apply(Command{Op: OpRevoke, Key: "x"})
			require.NoError(t, err)
			d.Get("free")
			d.Get("gone")
			txn, _ := d.Txn()
			a.apply(t, meddle)
			before := lockState(a.t)
			res := a.apply(t, txn)
			assert.Equal(t, Conflict, res.Code)
			assert.Empty(t, res.Sub)
			assert.Equal(t, before, lockState(a.t), "a conflict changes nothing")
		})
	}
}

func TestDraftRefusesToGrantAKeyTwice(t *testing.T) {
	d := New().Draft()
	_, err := d.Apply(acquire("k", "a", 10))
	require.NoError(t, err)
	_, err = d.Apply(release("k", "a"))
	require.NoError(t, err)
	_, err = d.Apply(acquire("k", "b", 10))
	assert.ErrorIs(t, err, ErrRegrant)
}

// TestPropertyTxnAllOrNothing interleaves random transactions, drafted against
// the table as it stood, with random commands applied before them: each
// transaction either conflicts and changes nothing, or applies with exactly
// the draft's outcomes and leaves the table the draft had for its keys.
func TestPropertyTxnAllOrNothing(t *testing.T) {
	applied, conflicts := 0, 0
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		a := newApplier()
		for _, c := range randomCommands(rng, 40) {
			a.apply(t, c)
		}
		for i := 0; i < 40; i++ {
			d := a.t.Draft()
			for _, c := range randomCommands(rng, 1+rng.Intn(4)) {
				if c.Op == OpMember || c.Op.IsSession() || c.hasSessionPart() {
					continue
				}
				if _, err := d.Apply(c); err != nil {
					require.ErrorIs(t, err, ErrRegrant)
					d = nil
					break
				}
			}
			if d == nil {
				continue
			}
			txn, ok := d.Txn()
			if !ok {
				continue
			}
			for _, c := range randomCommands(rng, rng.Intn(2)) {
				a.apply(t, c) // may meddle
			}
			before := lockState(a.t)
			res := a.apply(t, txn)
			switch res.Code {
			case Conflict:
				conflicts++
				require.Equal(t, before, lockState(a.t), "seed %d: a conflict changed the table", seed)
			case Applied:
				applied++
				require.True(t, d.Same(res), "seed %d: outcomes differ from the draft's", seed)
				for _, g := range txn.Txn.Guards {
					want, wheld := d.Get(g.Key)
					got, gheld := a.t.Get(g.Key)
					require.Equal(t, wheld, gheld, "seed %d key %s", seed, g.Key)
					if gheld {
						require.Equal(t, want.Owner, got.Owner, "seed %d key %s", seed, g.Key)
						require.Equal(t, want.TTL, got.TTL, "seed %d key %s", seed, g.Key)
						if want.Version == d.Position() {
							require.Equal(t, res.Position, got.Version, "seed %d key %s", seed, g.Key)
						} else {
							require.Equal(t, want.Ref(), got.Ref(), "seed %d key %s", seed, g.Key)
						}
					}
				}
			default:
				t.Fatalf("seed %d: a transaction answered %v", seed, res.Code)
			}
		}
	}
	assert.Greater(t, applied, 1000)
	assert.Greater(t, conflicts, 100)
	t.Logf("%d applied, %d conflicts", applied, conflicts)
}

func TestTxnApplyIsDeterministicInBatches(t *testing.T) {
	a, b := newApplier(), newApplier()
	for _, ap := range []*applier{a, b} {
		ap.apply(t, acquire("x", "h", 1000))
	}
	d := a.t.Draft()
	_, err := d.Apply(Command{Op: OpRelease, Key: "x", Owner: "h", Waiter: &Waiter{Owner: "w", TTL: 5}})
	require.NoError(t, err)
	txn, _ := d.Txn()
	ra := a.applyBatch(t, []Command{acquire("y", "o", 1), txn, acquire("z", "o", 1)})
	rb := []*Result{b.apply(t, acquire("y", "o", 1))}
	b.index++ // the batch's second position
	rb = append(rb, b.t.Apply(&raft.Log{Index: b.index, Type: raft.LogCommand, Data: txn.Encode(nil)}).(*Result))
	rb = append(rb, b.apply(t, acquire("z", "o", 1)))
	for i := range ra {
		assert.Equal(t, rb[i].Code, ra[i].Code)
		assert.Equal(t, rb[i].Lease, ra[i].Lease)
	}
	assert.Equal(t, lockState(a.t), lockState(b.t))
}

// A transaction that listed keys (KEYS) applies only if the same keys match
// its pattern when it is applied: a key created or deleted meanwhile makes
// it a conflict; a write to a listed key does not.
func TestTxnScanGuard(t *testing.T) {
	a := newApplier()
	a.apply(t, acquire("lock:1", "o", 1000))
	a.apply(t, acquire("lock:2", "o", 1000))
	a.apply(t, acquire("other", "o", 1000))
	draft := func() Command {
		d := a.t.Draft()
		keys := d.Scan("lock:*")
		assert.Contains(t, keys, "lock:2")
		_, err := d.Apply(Command{Op: OpRevoke, Key: "other"})
		require.NoError(t, err)
		txn, _ := d.Txn()
		return txn
	}
	txn := draft()
	a.apply(t, extend("lock:1", "o", 5000))
	assert.Equal(t, Applied, a.apply(t, txn).Code, "a write to a listed key leaves the listing as it was")
	a.apply(t, acquire("other", "o", 1000))
	txn = draft()
	a.apply(t, acquire("lock:3", "o", 1000))
	assert.Equal(t, Conflict, a.apply(t, txn).Code, "a new matching key")
	txn = draft()
	a.apply(t, release("lock:1", "o"))
	assert.Equal(t, Conflict, a.apply(t, txn).Code, "a matching key deleted")
	got, err := Decode(txn.Encode(nil))
	require.NoError(t, err)
	assert.Equal(t, txn, got)
	assert.Equal(t, len(txn.Encode(nil)), txn.Txn.Size())
}
