package fsm

import (
	"encoding/binary"
	"fmt"
)

// codecMode is what a walk of the layout does with each field.
type codecMode uint8

const (
	encoding codecMode = iota // append the field to buf
	sizing                    // add the field's length to n
	decoding                  // read the field from d into its place
)

// codec walks a layout (Command.layout, Txn.layout) in one of three modes, so that one
// description of the fields serves the encoder, the decoder and the
// length.
type codec struct {
	mode codecMode
	buf  []byte
	n    int
	d    decoder
}

func (k *codec) byte(p *byte) {
	switch k.mode {
	case encoding:
		k.buf = append(k.buf, *p)
	case sizing:
		k.n++
	default:
		*p = k.d.byte()
	}
}

func (k *codec) uvarint(p *uint64) {
	switch k.mode {
	case encoding:
		k.buf = binary.AppendUvarint(k.buf, *p)
	case sizing:
		k.n += uvarintLen(*p)
	default:
		*p = k.d.uvarint()
	}
}

// str is a key or owner: up to MaxStringLen.
func (k *codec) str(p *string) { k.bytes(p, MaxStringLen) }

// value is a put's data or a lock's value: up to MaxValueLen.
func (k *codec) value(p *string) { k.bytes(p, MaxValueLen) }

func (k *codec) bytes(p *string, limit uint64) {
	switch k.mode {
	case encoding:
		k.buf = appendString(k.buf, *p)
	case sizing:
		k.n += stringLen(*p)
	default:
		*p = k.d.bytes(limit)
	}
}

// u64 is a fixed 8-byte little-endian number.
func (k *codec) u64(p *uint64) {
	switch k.mode {
	case encoding:
		k.buf = binary.LittleEndian.AppendUint64(k.buf, *p)
	case sizing:
		k.n += 8
	default:
		*p = k.d.u64()
	}
}

// count is the uvarint count of a list of n items, each at least minItem
// bytes: written as n, or read, and then refused if more than the bytes
// left could hold, or if zero and nonEmpty. tooMany is the error's text,
// with the count and the bytes left. It reports false if decoding failed.
func (k *codec) count(n, minItem int, nonEmpty bool, tooMany string) (int, bool) {
	if k.mode != decoding {
		v := uint64(n)
		k.uvarint(&v)
		return n, true
	}
	v := k.d.uvarint()
	if k.d.err != nil {
		return 0, false
	}
	if nonEmpty && v == 0 || v > uint64(len(k.d.b))/uint64(minItem) {
		k.d.err = fmt.Errorf("%w: "+tooMany, ErrBadEntry, v, len(k.d.b))
		return 0, false
	}
	return int(v), true
}

// fit sizes the list a decoding walk fills to n items: in *s's room if it
// has enough (so a caller can decode into an array it allocated with the
// rest), else in a new slice, and nil for none. Encoding and sizing, it
// leaves *s alone: a walk writes nothing to what it encodes.
func fit[T any](k *codec, s *[]T, n int) {
	switch {
	case k.mode != decoding:
	case n == 0:
		*s = nil
	case n <= cap(*s):
		*s = (*s)[:n]
	default:
		*s = make([]T, n)
	}
}

// reading reports whether the walk is decoding and has met no error: when
// the checks of what it read apply.
func (k *codec) reading() bool { return k.mode == decoding && k.d.err == nil }

// fail refuses the entry being decoded as malformed, for the reason given.
func (k *codec) fail(reason string) {
	k.d.err = fmt.Errorf("%w: %s", ErrBadEntry, reason)
}

// command is command i of a transaction: a uvarint length, then its Encode
// form, which must be a plain command's.
func (k *codec) command(c *Command, i int) {
	switch k.mode {
	case encoding:
		k.buf = binary.AppendUvarint(k.buf, uint64(c.encodedLen()))
		k.buf = c.Encode(k.buf)
		return
	case sizing:
		l := c.encodedLen()
		k.n += uvarintLen(uint64(l)) + l
		return
	}
	d := &k.d
	size := d.uvarint()
	switch {
	case d.err != nil:
		return
	case uint64(len(d.b)) < size:
		d.err = ErrShortEntry
		return
	case size == 0 || d.b[0] != EncodingVersion:
		d.err = fmt.Errorf("%w: command %d of a txn is not a plain command", ErrBadEntry, i)
		return
	}
	var err error
	if *c, err = Decode(d.b[:size]); err != nil {
		d.err = fmt.Errorf("command %d of the txn: %w", i, err)
		return
	}
	d.b = d.b[size:]
}

func stringLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// appendValue appends a value (a put's data): as a string, but up to
// MaxValueLen.
func appendValue(dst []byte, s string) []byte { return appendString(dst, s) }

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decoder reads fields and remembers the first error; later reads return
// zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.err = ErrShortEntry
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n == 0 {
		d.err = ErrShortEntry
		return 0
	}
	if n < 0 {
		d.err = fmt.Errorf("%w: varint overflows 64 bits", ErrBadEntry)
		return 0
	}
	if n > 1 && d.b[n-1] == 0 {
		// A varint with a zero last byte has a shorter form: accepting it
		// would let two byte strings mean the same entry.
		d.err = fmt.Errorf("%w: non-minimal varint", ErrBadEntry)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string { return d.bytes(MaxStringLen) }

func (d *decoder) u64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.err = ErrShortEntry
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// value reads a put's data, which may be longer than a key or owner.
func (d *decoder) value() string { return d.bytes(MaxValueLen) }

func (d *decoder) bytes(limit uint64) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > limit {
		d.err = fmt.Errorf("%w: string of %d bytes", ErrBadEntry, n)
		return ""
	}
	if uint64(len(d.b)) < n {
		d.err = ErrShortEntry
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
