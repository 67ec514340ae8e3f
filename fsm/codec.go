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

// codec walks a layout (Command.layout) in one of three modes, so that one
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

// count is the uvarint count of a list of n items (what), each at least
// minItem bytes: written as n, or read, and then refused if zero or more
// than the bytes left could hold. It reports false if decoding failed.
func (k *codec) count(n, minItem int, what string) (int, bool) {
	if k.mode != decoding {
		v := uint64(n)
		k.uvarint(&v)
		return n, true
	}
	v := k.d.uvarint()
	if k.d.err != nil {
		return 0, false
	}
	if v == 0 || v > uint64(len(k.d.b))/uint64(minItem) {
		k.d.err = fmt.Errorf("%w: %d %s in %d bytes", ErrBadEntry, v, what, len(k.d.b))
		return 0, false
	}
	return int(v), true
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
