package fsm

import (
	"encoding/binary"
	"fmt"
)

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

// encode appends the transaction form (its layout is in TxnVersion's
// comment); each command in it is a plain command's (Command.layout).
func (t *Txn) encode(dst []byte) []byte {
	dst = append(dst, TxnVersion)
	dst = binary.AppendUvarint(dst, uint64(len(t.Guards)))
	for _, g := range t.Guards {
		dst = appendString(dst, g.Key)
		dst = binary.AppendUvarint(dst, g.Mod)
		dst = binary.AppendUvarint(dst, g.Mem)
	}
	dst = binary.AppendUvarint(dst, uint64(len(t.Scans)))
	for _, sc := range t.Scans {
		dst = appendString(dst, sc.Pattern)
		dst = binary.AppendUvarint(dst, sc.Count)
		dst = binary.LittleEndian.AppendUint64(dst, sc.Digest)
	}
	dst = binary.AppendUvarint(dst, uint64(len(t.Cmds)))
	for _, c := range t.Cmds {
		dst = binary.AppendUvarint(dst, uint64(c.encodedLen()))
		dst = c.Encode(dst)
	}
	return dst
}

// Size is the length of the transaction's encoding.
func (t *Txn) Size() int {
	n := 1 + uvarintLen(uint64(len(t.Guards))) + uvarintLen(uint64(len(t.Scans))) + uvarintLen(uint64(len(t.Cmds)))
	for _, g := range t.Guards {
		n += stringLen(g.Key) + uvarintLen(g.Mod) + uvarintLen(g.Mem)
	}
	for _, sc := range t.Scans {
		n += stringLen(sc.Pattern) + uvarintLen(sc.Count) + 8
	}
	for _, c := range t.Cmds {
		l := c.encodedLen()
		n += uvarintLen(uint64(l)) + l
	}
	return n
}

// minScanLen is the fewest bytes a scan takes: an empty pattern, a count and
// the digest.
const minScanLen = 1 + 1 + 8

// minGuardLen is the fewest bytes a guard takes: a key of one byte and two
// one-byte varints.
const minGuardLen = 2 + 2

// decodeTxn parses a transaction after its version byte. Guards must be in
// strictly increasing key order and there must be at least one command, none
// of them a member entry or a transaction, so one byte string means one
// transaction.
func decodeTxn(d decoder) (Command, error) {
	// The usual transaction, a key read and one command, in one allocation.
	one := &struct {
		t Txn
		g [1]Guard
		c [1]Command
	}{}
	t := &one.t
	t.Guards, t.Cmds = one.g[:0], one.c[:0]
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b))/minGuardLen {
		return Command{}, fmt.Errorf("%w: %d guards in %d bytes", ErrBadEntry, n, len(d.b))
	}
	switch {
	case d.err == nil && n > 1:
		t.Guards = make([]Guard, 0, n)
	case n == 0:
		t.Guards = nil
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		g := Guard{Key: d.string()}
		g.Mod = d.uvarint()
		g.Mem = d.uvarint()
		if d.err == nil && (g.Key == "" || len(t.Guards) > 0 && g.Key <= t.Guards[len(t.Guards)-1].Key) {
			return Command{}, fmt.Errorf("%w: txn guards not in increasing key order", ErrBadEntry)
		}
		t.Guards = append(t.Guards, g)
	}
	ns := d.uvarint()
	if d.err == nil && ns > uint64(len(d.b))/minScanLen {
		return Command{}, fmt.Errorf("%w: %d scans in %d bytes", ErrBadEntry, ns, len(d.b))
	}
	for i := uint64(0); i < ns && d.err == nil; i++ {
		sc := Scan{Pattern: d.string(), Count: d.uvarint(), Digest: d.u64()}
		if d.err == nil && len(t.Scans) > 0 && sc.Pattern <= t.Scans[len(t.Scans)-1].Pattern {
			return Command{}, fmt.Errorf("%w: txn scans not in increasing pattern order", ErrBadEntry)
		}
		t.Scans = append(t.Scans, sc)
	}
	m := d.uvarint()
	switch {
	case d.err != nil:
		return Command{}, d.err
	case m == 0:
		return Command{}, fmt.Errorf("%w: txn without commands", ErrBadEntry)
	case m > uint64(len(d.b))/minEncodedLen:
		return Command{}, fmt.Errorf("%w: txn of %d commands in %d bytes", ErrBadEntry, m, len(d.b))
	}
	if m > 1 {
		t.Cmds = make([]Command, 0, m)
	}
	for range m {
		size := d.uvarint()
		if d.err != nil {
			return Command{}, d.err
		}
		if uint64(len(d.b)) < size {
			return Command{}, ErrShortEntry
		}
		if size == 0 || d.b[0] != EncodingVersion {
			return Command{}, fmt.Errorf("%w: command %d of a txn is not a plain command", ErrBadEntry, len(t.Cmds))
		}
		c, err := Decode(d.b[:size])
		if err != nil {
			return Command{}, fmt.Errorf("command %d of the txn: %w", len(t.Cmds), err)
		}
		if c.Op == OpMember || c.Op == OpClusterID || c.Op.IsSession() || c.hasSessionPart() {
			return Command{}, fmt.Errorf("%w: member, cluster ID or session command in a txn", ErrBadEntry)
		}
		t.Cmds = append(t.Cmds, c)
		d.b = d.b[size:]
	}
	if len(d.b) != 0 {
		return Command{}, fmt.Errorf("%w: %d trailing bytes", ErrBadEntry, len(d.b))
	}
	return Command{Op: OpTxn, Txn: t}, nil
}
