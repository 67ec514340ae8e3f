package resp

import (
	"bufio"
	"fmt"
	"strings"
)

// ErrorReply is the text of an error reply, without its '-'. To a caller of
// Plain a refusal is an answer to compare, not a failed read, so it is a
// value and not an error.
type ErrorReply string

// Code returns the reply's first word: UNCERTAIN, NOTLEADER, ERR...
func (e ErrorReply) Code() string {
	code, _, _ := strings.Cut(string(e), " ")
	return code
}

// Plain converts a RESP2 reply to the Go values tests compare: a string for
// a simple or bulk string, ErrorReply, int64, []any, or nil for a null bulk
// string or array. A RESP3 type is an error: a connection that never asked
// for RESP3 must not receive one.
func Plain(v Value) (any, error) {
	switch v.Kind {
	case SimpleString:
		return v.Str, nil
	case Error:
		return ErrorReply(v.Str), nil
	case Integer:
		return v.Int, nil
	case BulkString:
		if v.IsNull {
			return nil, nil
		}
		return v.Str, nil
	case Array:
		if v.IsNull {
			return nil, nil
		}
		out := make([]any, len(v.Elems))
		for i, e := range v.Elems {
			var err error
			if out[i], err = Plain(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("reply %v is not RESP2", v)
}

// ReadPlain reads one reply and converts it as Plain does.
func ReadPlain(r *bufio.Reader) (any, error) {
	v, err := ReadValue(r)
	if err != nil {
		return nil, err
	}
	return Plain(v)
}
