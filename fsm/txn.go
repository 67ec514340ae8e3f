package fsm

import "fmt"

// Txn is a command made of several lock commands. It is applied only if
// every guard still holds; then its commands are applied in order, all at the
// transaction's one position, so the grants it makes share one token (each
// key is granted by a transaction at most once). If a guard fails, nothing is
// applied and the result is Conflict.
type Txn struct {
	// Guards are the keys the leader read and what it saw, in increasing
	// key order.
	Guards []Guard
	// Scans are the key listings the leader read (KEYS), in increasing
	// pattern order; each holds if the table's keys matching its pattern
	// are still the ones listed.
	Scans []Scan
	// Cmds are applied in order; none is an OpMember or an OpTxn.
	Cmds []Command
}

// Scan is what a transaction read of the set of keys matching Pattern (a
// Redis glob): how many there were and a digest of them (Table.scan). The
// keys listed are the table's, whatever their TTLs.
type Scan struct {
	Pattern string
	Count   uint64
	Digest  uint64
}

// Guard is what a transaction read of one key: the position of its last
// write (zero if the key was free) and of its remembered release (zero if
// none). It holds if the key still has exactly those.
type Guard struct {
	Key string
	Mod uint64
	Mem uint64
}

// encode appends the transaction form: its version byte, then the fields
// layout lists.
func (t *Txn) encode(dst []byte) []byte {
	k := codec{mode: encoding, buf: append(dst, TxnVersion)}
	t.layout(&k)
	return k.buf
}

// Size is the length of the transaction's encoding.
func (t *Txn) Size() int {
	k := codec{mode: sizing}
	t.layout(&k)
	return 1 + k.n
}

// layout is the one description of the transaction form (TxnVersion) after
// its version byte: encode, Size and decodeTxn each walk it with a codec of
// their mode. Strings are a uvarint length and the bytes.
//
//	uvarint count of guards, then each: key, uvarint Mod, uvarint Mem
//	uvarint count of scans, then each: pattern, uvarint Count, 8-byte
//	  little-endian Digest
//	uvarint count (at least one) of commands, then each: a uvarint length
//	  and its Encode form (a plain command, Command.layout)
//
// Decoding, the walk checks as it reads: each count against the bytes
// left, guards in strictly increasing key order (no empty key), scans in
// strictly increasing pattern order, and commands that are plain ones and
// none of them a member, cluster ID or session command, so that one byte
// string means one transaction. It fills the Guards and Cmds it is given
// when they have room (decodeTxn's one allocation).
func (t *Txn) layout(k *codec) {
	n, _ := k.count(len(t.Guards), minGuardLen, false, "%d guards in %d bytes")
	fit(k, &t.Guards, n)
	for i := range t.Guards {
		g := &t.Guards[i]
		k.str(&g.Key)
		k.uvarint(&g.Mod)
		k.uvarint(&g.Mem)
		if k.reading() && (g.Key == "" || i > 0 && g.Key <= t.Guards[i-1].Key) {
			k.fail("txn guards not in increasing key order")
		}
	}
	n, _ = k.count(len(t.Scans), minScanLen, false, "%d scans in %d bytes")
	fit(k, &t.Scans, n)
	for i := range t.Scans {
		sc := &t.Scans[i]
		k.str(&sc.Pattern)
		k.uvarint(&sc.Count)
		k.u64(&sc.Digest)
		if k.reading() && i > 0 && sc.Pattern <= t.Scans[i-1].Pattern {
			k.fail("txn scans not in increasing pattern order")
		}
	}
	n, ok := k.count(len(t.Cmds), minEncodedLen, false, "txn of %d commands in %d bytes")
	if ok && n == 0 && k.mode == decoding {
		k.fail("txn without commands")
	}
	fit(k, &t.Cmds, n)
	for i := range t.Cmds {
		c := &t.Cmds[i]
		k.command(c, i)
		if k.reading() && (c.Op == OpMember || c.Op == OpClusterID || c.Op == OpFormat || c.Op.IsSession() || c.hasSessionPart()) {
			k.fail("member, cluster ID or session command in a txn")
		}
	}
}

// minScanLen is the fewest bytes a scan takes: an empty pattern, a count and
// the digest.
const minScanLen = 1 + 1 + 8

// minGuardLen is the fewest bytes a guard takes: a key of one byte and two
// one-byte varints.
const minGuardLen = 2 + 2

// decodeTxn parses a transaction after its version byte (layout has its
// checks), with nothing after its last command.
func decodeTxn(d decoder) (Command, error) {
	// The usual transaction, a key read and one command, in one allocation.
	one := &struct {
		t Txn
		g [1]Guard
		c [1]Command
	}{}
	t := &one.t
	t.Guards, t.Cmds = one.g[:0], one.c[:0]
	k := codec{mode: decoding, d: d}
	t.layout(&k)
	if k.d.err != nil {
		return Command{}, k.d.err
	}
	if len(k.d.b) != 0 {
		return Command{}, fmt.Errorf("%w: %d trailing bytes", ErrBadEntry, len(k.d.b))
	}
	return Command{Op: OpTxn, Txn: t}, nil
}
