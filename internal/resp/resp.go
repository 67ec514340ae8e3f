// Package resp reads and writes the Redis serialization protocol, RESP2 and
// RESP3: one reader of replies (parsed, or as raw bytes to relay unchanged)
// and one writer of commands, for the bridge's forwarding, the clients, the
// benchmark harness and the tests.
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
func ReadValue(r *bufio.Reader) (Value, error) { return readValue(r, 0, nil) }

// ReadRaw reads one reply and returns its bytes, to relay unchanged.
func ReadRaw(r *bufio.Reader) ([]byte, error) {
	var raw []byte
	_, err := readValue(r, 0, &raw)
	return raw, err
}

func readLine(r *bufio.Reader, raw *[]byte) (string, error) {
	line, err := r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return "", fmt.Errorf("%w: a line longer than %d bytes", ErrMalformed, r.Size())
	}
	if err != nil {
		return "", err
	}
	if raw != nil {
		*raw = append(*raw, line...)
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return "", fmt.Errorf("%w: %q", ErrMalformed, line)
	}
	return string(line[:len(line)-2]), nil
}

func readValue(r *bufio.Reader, depth int, raw *[]byte) (Value, error) {
	if depth > MaxDepth {
		return Value{}, fmt.Errorf("%w: nested deeper than %d", ErrMalformed, MaxDepth)
	}
	line, err := readLine(r, raw)
	if err != nil {
		return Value{}, err
	}
	v := Value{Kind: Kind(line[0])}
	body := line[1:]
	switch v.Kind {
	case SimpleString, Error, BigNumber, Double:
		v.Str = body
	case Integer:
		if v.Int, err = strconv.ParseInt(body, 10, 64); err != nil {
			return Value{}, fmt.Errorf("%w: integer %q", ErrMalformed, body)
		}
	case Null:
		v.IsNull = true
	case Boolean:
		switch body {
		case "t":
			v.Int = 1
		case "f":
		default:
			return Value{}, fmt.Errorf("%w: boolean %q", ErrMalformed, body)
		}
	case BulkString, BlobError, Verbatim:
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > MaxBulk {
			return Value{}, fmt.Errorf("%w: bulk length %q", ErrMalformed, body)
		}
		if n == -1 {
			v.IsNull = true
			return v, nil
		}
		buf := make([]byte, 0, min(n+2, 64<<10))
		var chunk [4096]byte
		for left := n + 2; left > 0; {
			m, err := r.Read(chunk[:min(left, len(chunk))])
			buf = append(buf, chunk[:m]...)
			left -= m
			if err != nil {
				return Value{}, err
			}
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return Value{}, fmt.Errorf("%w: bulk not terminated", ErrMalformed)
		}
		if raw != nil {
			*raw = append(*raw, buf...)
		}
		v.Str = string(buf[:n])
	case Array, Map, Set, Push, Attribute:
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > MaxElements {
			return Value{}, fmt.Errorf("%w: aggregate length %q", ErrMalformed, body)
		}
		if n == -1 {
			v.IsNull = true
			return v, nil
		}
		if v.Kind == Map || v.Kind == Attribute {
			n *= 2
		}
		v.Elems = make([]Value, 0, min(n, 1024))
		for range n {
			e, err := readValue(r, depth+1, raw)
			if err != nil {
				return Value{}, err
			}
			v.Elems = append(v.Elems, e)
		}
		if v.Kind == Attribute {
			// An attribute precedes the value it describes.
			return readValue(r, depth, raw)
		}
	default:
		return Value{}, fmt.Errorf("%w: unknown type in %q", ErrMalformed, line)
	}
	return v, nil
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
