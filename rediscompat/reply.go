package rediscompat

import (
	"strconv"
	"strings"
)

// Reply is what a command or script answers: one of the types below. The
// bridge writes it in the client's RESP version.
type Reply interface{ isReply() }

func (Status) isReply()   {}
func (Error) isReply()    {}
func (Int) isReply()      {}
func (Bulk) isReply()     {}
func (Nil) isReply()      {}
func (NilArray) isReply() {}
func (Array) isReply()    {}
func (Map) isReply()      {}
func (Double) isReply()   {}
func (Bool) isReply()     {}

// The reply types.
type (
	// Status is a simple string (+OK).
	Status string
	// Error is an error reply, code first ("ERR syntax error").
	Error string
	// Int is an integer reply.
	Int int64
	// Bulk is a bulk string.
	Bulk string
	// Nil is the null bulk string (RESP2 $-1, RESP3 _).
	Nil struct{}
	// NilArray is the null array (RESP2 *-1, RESP3 _).
	NilArray struct{}
	// Array is an array of replies.
	Array []Reply
	// Map is a RESP3 map (in RESP2 an array of its keys and values), in
	// order.
	Map []Reply
	// Double is a RESP3 double (in RESP2 a bulk string).
	Double float64
	// Bool is a RESP3 boolean (in RESP2 the integer 1 or 0).
	Bool bool
)

// null is the null reply: the null array if array, else the null bulk
// string (LPOP and ZRANK answer the former when given a count or
// WITHSCORE).
func null(array bool) Reply {
	if array {
		return NilArray{}
	}
	return Nil{}
}

// Common error replies, in Redis's words.
const (
	errSyntax      = Error("ERR syntax error")
	errNotInteger  = Error("ERR value is not an integer or out of range")
	errNotFloat    = Error("ERR value is not a valid float")
	errWrongType   = Error("WRONGTYPE Operation against a key holding the wrong kind of value")
	errOverflow    = Error("ERR increment or decrement would overflow")
	errNaN         = Error("ERR increment would produce NaN or Infinity")
	errNoSuchKey   = Error("ERR no such key")
	errIndexRange  = Error("ERR index out of range")
	errMinMaxFloat = Error("ERR min or max is not a float")
)

// wrongArity is Redis's error for a bad argument count.
func wrongArity(name string) Error {
	return Error("ERR wrong number of arguments for '" + strings.ToLower(name) + "' command")
}

var (
	replyOK Reply = Status("OK")
	zero    Reply = Int(0)
	one     Reply = Int(1)
)

func boolInt(b bool) Reply {
	if b {
		return one
	}
	return zero
}

// formatFloat formats a double as Redis does in its replies (%.17g).
func formatFloat(f float64) string {
	switch {
	case f != f:
		return "nan"
	case f > 1.7976931348623157e308:
		return "inf"
	case f < -1.7976931348623157e308:
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}

// formatIncrFloat formats the result of INCRBYFLOAT and HINCRBYFLOAT: the
// shortest representation (Redis computes in long double and prints 17
// decimals with trailing zeros removed; fencer computes in float64).
func formatIncrFloat(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// bulkOrNil answers s, or null if !ok.
func bulkOrNil(s string, ok bool) Reply {
	if !ok {
		return Nil{}
	}
	return Bulk(s)
}
