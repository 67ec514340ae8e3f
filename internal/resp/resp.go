// Package resp reads and writes the Redis serialization protocol, RESP2 and
// RESP3: one reader of replies (parsed, or as raw bytes to relay unchanged,
// or parsed into reused memory by a Reader) and one writer of commands, for
// the bridge's forwarding, the clients, the benchmark harness and the tests,
// and the plain Go values (Plain) that tests compare replies as.
package resp

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Limits on a reply read; a reply over them is malformed.
const (
	MaxBulk     = 512 << 20
	MaxElements = 1 << 24
	MaxDepth    = 32
)

// ErrMalformed means the bytes read are not one RESP reply.
var ErrMalformed = errors.New("resp: malformed reply")

// Kind is a reply's type: its first byte on the wire.
type Kind byte

// The kinds of RESP2 and RESP3.
const (
	SimpleString Kind = '+'
	Error        Kind = '-'
	Integer      Kind = ':'
	BulkString   Kind = '$'
	Array        Kind = '*'
	Null         Kind = '_'
	Double       Kind = ','
	Boolean      Kind = '#'
	BlobError    Kind = '!'
	Verbatim     Kind = '='
	BigNumber    Kind = '('
	Map          Kind = '%'
	Set          Kind = '~'
	Push         Kind = '>'
	Attribute    Kind = '|'
)

// Value is one parsed reply.
type Value struct {
	Kind Kind
	// Str is the text of a simple string, error, bulk string, verbatim
	// string, big number or double.
	Str string
	// Int is an integer's value; a boolean's is 1 or 0.
	Int int64
	// Elems are an array's, set's or push's elements, or a map's keys and
	// values in turn.
	Elems []Value
	// IsNull marks RESP2's null bulk string and null array, and RESP3's
	// null.
	IsNull bool
}

// String renders v for test messages.
func (v Value) String() string {
	switch {
	case v.IsNull:
		return "(nil)"
	case v.Kind == Error, v.Kind == BlobError:
		return "(error) " + v.Str
	case v.Kind == Integer:
		return "(integer) " + strconv.FormatInt(v.Int, 10)
	case v.Kind == Boolean:
		return fmt.Sprintf("(boolean) %v", v.Int == 1)
	case v.Kind == Double:
		return "(double) " + v.Str
	case v.Elems != nil || v.Kind == Array || v.Kind == Map || v.Kind == Set || v.Kind == Push:
		parts := make([]string, len(v.Elems))
		for i, e := range v.Elems {
			parts[i] = e.String()
		}
		return string(v.Kind) + "[" + strings.Join(parts, ", ") + "]"
	}
	return strconv.Quote(v.Str)
}

// ReadValue reads one reply and parses it.
func ReadValue(r *bufio.Reader) (Value, error) {
	var v Value
	d := decoder{r: r}
	if err := d.value(0, &v); err != nil {
		return Value{}, err
	}
	return v, nil
}

// ReadRaw reads one reply and returns its bytes, to relay unchanged.
func ReadRaw(r *bufio.Reader) ([]byte, error) {
	var raw []byte
	var v Value
	d := decoder{r: r, raw: &raw}
	err := d.value(0, &v)
	return raw, err
}

// Reader reads replies from one connection as ReadValue does, but reuses
// its memory from one reply to the next, so that a client reading many
// small replies allocates for their text only. It is for clients whose own
// cost must stay small beside the server's: the benchmark's load generator.
// It keeps the element slices of the replies it has read, and the strings
// last held in them until they are overwritten: clearing them on each read
// would cost such a client more than the memory is worth.
type Reader struct {
	r *bufio.Reader
	// v is the last reply. used holds the element slices under it, spare
	// those free for the next reply.
	v           Value
	used, spare [][]Value
}

// NewReader returns a Reader of the replies in r. The caller may still ask
// r how much it has buffered, but must not read from it.
func NewReader(r *bufio.Reader) *Reader { return &Reader{r: r} }

// ReadValue reads one reply and parses it. The Value, and the elements
// under it, are the Reader's and only good until the next call; the
// strings in them are copies and may be kept.
func (rd *Reader) ReadValue() (*Value, error) {
	if len(rd.used) > 0 {
		rd.spare = append(rd.spare, rd.used...)
		rd.used = rd.used[:0]
	}
	d := decoder{r: rd.r, lend: rd}
	if err := d.value(0, &rd.v); err != nil {
		rd.v = Value{}
		return nil, err
	}
	return &rd.v, nil
}

// decoder reads one reply from r. When raw is set it collects the
// reply's bytes; when lend is set, element slices come from that Reader.
type decoder struct {
	r    *bufio.Reader
	raw  *[]byte
	lend *Reader
}

// line returns the next line without its CRLF. It points into the
// bufio.Reader's buffer, so it is only good until the next read.
func (d *decoder) line() ([]byte, error) {
	line, err := d.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrMalformed, d.r.Size())
	}
	if err != nil {
		return nil, err
	}
	if d.raw != nil {
		*d.raw = append(*d.raw, line...)
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: %q", ErrMalformed, line)
	}
	return line[:len(line)-2], nil
}

// value reads one reply into v, which it overwrites. Numbers are parsed
// from the buffer in place; only text that ends up in v is copied.
func (d *decoder) value(depth int, v *Value) error {
	if depth > MaxDepth {
		return fmt.Errorf("%w: nested deeper than %d", ErrMalformed, MaxDepth)
	}
	line, err := d.line()
	if err != nil {
		return err
	}
	*v = Value{Kind: Kind(line[0])}
	body := line[1:]
	switch v.Kind {
	case SimpleString, Error, BigNumber, Double:
		v.Str = string(body)
	case Integer:
		if v.Int, err = strconv.ParseInt(string(body), 10, 64); err != nil {
			return fmt.Errorf("%w: integer %q", ErrMalformed, body)
		}
	case Null:
		v.IsNull = true
	case Boolean:
		switch string(body) {
		case "t":
			v.Int = 1
		case "f":
		default:
			return fmt.Errorf("%w: boolean %q", ErrMalformed, body)
		}
	case BulkString, BlobError, Verbatim:
		n, err := strconv.Atoi(string(body))
		if err != nil || n < -1 || n > MaxBulk {
			return fmt.Errorf("%w: bulk length %q", ErrMalformed, body)
		}
		if n == -1 {
			v.IsNull = true
			return nil
		}
		v.Str, err = d.bulk(n)
		return err
	case Array, Map, Set, Push, Attribute:
		n, err := strconv.Atoi(string(body))
		if err != nil || n < -1 || n > MaxElements {
			return fmt.Errorf("%w: aggregate length %q", ErrMalformed, body)
		}
		if n == -1 {
			v.IsNull = true
			return nil
		}
		if v.Kind == Map || v.Kind == Attribute {
			n *= 2
		}
		if err := d.elements(depth, v, n); err != nil {
			return err
		}
		if v.Kind == Attribute {
			// An attribute precedes the value it describes.
			return d.value(depth, v)
		}
	default:
		return fmt.Errorf("%w: unknown type in %q", ErrMalformed, line)
	}
	return nil
}

// elements reads v's n elements. The slice starts small and grows as
// elements arrive, so that a length alone cannot make it allocate much.
func (d *decoder) elements(depth int, v *Value, n int) error {
	if d.lend != nil && len(d.lend.spare) > 0 {
		last := len(d.lend.spare) - 1
		v.Elems = d.lend.spare[last][:0]
		d.lend.spare = d.lend.spare[:last]
	} else {
		v.Elems = make([]Value, 0, min(n, 1024))
	}
	var err error
	for i := range n {
		if i < cap(v.Elems) {
			v.Elems = v.Elems[:i+1]
		} else {
			v.Elems = append(v.Elems, Value{})
		}
		if err = d.value(depth+1, &v.Elems[i]); err != nil {
			break
		}
	}
	if d.lend != nil {
		d.lend.used = append(d.lend.used, v.Elems)
	}
	return err
}

// bulk reads a bulk string's n bytes and its CRLF.
func (d *decoder) bulk(n int) (string, error) {
	if n+2 <= d.r.Size() {
		// The usual case: the string fits in the buffer and is copied
		// once, from there.
		b, err := d.r.Peek(n + 2)
		if err != nil {
			return "", err
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return "", fmt.Errorf("%w: bulk not terminated", ErrMalformed)
		}
		if d.raw != nil {
			*d.raw = append(*d.raw, b...)
		}
		s := string(b[:n])
		_, _ = d.r.Discard(n + 2)
		return s, nil
	}
	buf := make([]byte, 0, min(n+2, 64<<10))
	var chunk [4096]byte
	for left := n + 2; left > 0; {
		m, err := d.r.Read(chunk[:min(left, len(chunk))])
		buf = append(buf, chunk[:m]...)
		left -= m
		if err != nil {
			return "", err
		}
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return "", fmt.Errorf("%w: bulk not terminated", ErrMalformed)
	}
	if d.raw != nil {
		*d.raw = append(*d.raw, buf...)
	}
	return string(buf[:n]), nil
}

// AppendCommand appends args as a RESP array of bulk strings.
func AppendCommand(dst []byte, args ...[]byte) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(a)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, a...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}

// Command encodes string arguments as a RESP command.
func Command(args ...string) []byte {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	return AppendCommand(nil, b...)
}
