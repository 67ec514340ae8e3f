package wire

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Error is one error reply: its code and the text after it.
type Error struct {
	Code Code
	Text string
}

// String is the reply as it goes on the wire, without RESP's leading "-"
// and its CRLF: the code, a space and the text.
func (e Error) String() string {
	if e.Text == "" {
		return string(e.Code)
	}
	return string(e.Code) + " " + e.Text
}

// Parse splits an error reply into its code and text. reply is the reply
// as RESP clients return it, without the leading "-" and the CRLF (what
// go-redis's redis.Error.Error() returns).
func Parse(reply string) Error {
	code, text, _ := strings.Cut(reply, " ")
	return Error{Code: Code(code), Text: text}
}

// Unknown stands for a field whose value is not known, such as the leader's
// address in a NOTLEADER reply of a node that knows no leader.
const Unknown = "-"

// FormatNotLeader returns the NOTLEADER reply of a node that is not the
// leader, naming the leader's ID and client address, each empty if not
// known:
//
//	NOTLEADER <leader-id> <leader-addr> <text>
//
// Each field is one word: Unknown if empty, otherwise the value with every
// byte outside '!'..'~', and '%', written %XX (so "-" itself is %2D).
// Node IDs and host:port addresses are written as they are.
func FormatNotLeader(leaderID, leaderAddr string) Error {
	text := "not the leader: send commands to the leader"
	switch {
	case leaderID == "":
		text = "not the leader, and no leader is known: retry later"
	case leaderAddr == "":
		text = "not the leader, and the leader's client address is not known yet: retry later"
	}
	return Error{Code: NotLeader, Text: field(leaderID) + " " + field(leaderAddr) + " " + text}
}

// ParseNotLeader returns the leader's ID and client address that a
// NOTLEADER reply names, each empty if the node did not know it. ok is
// false if e is not a well-formed NOTLEADER reply.
func ParseNotLeader(e Error) (leaderID, leaderAddr string, ok bool) {
	if e.Code != NotLeader {
		return "", "", false
	}
	f := strings.Fields(e.Text)
	if len(f) < 2 {
		return "", "", false
	}
	id, okID := unfield(f[0])
	addr, okAddr := unfield(f[1])
	if !okID || !okAddr {
		return "", "", false
	}
	if addr != "" {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", false
		}
	}
	return id, addr, true
}

// field writes v as one word (see FormatNotLeader).
func field(v string) string {
	switch v {
	case "":
		return Unknown
	case Unknown:
		return "%2D"
	}
	var sb strings.Builder
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < '!' || c > '~' || c == '%' {
			fmt.Fprintf(&sb, "%%%02X", c)
		} else {
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

// unfield reads a word written by field.
func unfield(w string) (string, bool) {
	if w == Unknown {
		return "", true
	}
	if !strings.Contains(w, "%") {
		return w, true
	}
	var sb strings.Builder
	for i := 0; i < len(w); i++ {
		if w[i] != '%' {
			sb.WriteByte(w[i])
			continue
		}
		if i+2 >= len(w) {
			return "", false
		}
		c, err := strconv.ParseUint(w[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		sb.WriteByte(byte(c))
		i += 2
	}
	return sb.String(), true
}

// invalidPrefix starts the text of an ERR reply to an invalid argument.
const invalidPrefix = "invalid argument: "

// FormatInvalidArgument is the ERR reply to a request whose argument arg
// (key, owner, ttl, wait, id, address, command) is wrong:
//
//	ERR invalid argument: <arg>: <reason>
//
// arg is one word. Nothing was done; the request as it is will not pass.
func FormatInvalidArgument(arg, reason string) Error {
	return Error{Code: Err, Text: invalidPrefix + arg + ": " + reason}
}

// ParseInvalidArgument returns the argument an invalid-argument reply names
// and the reason; ok is false if e is not one.
func ParseInvalidArgument(e Error) (arg, reason string, ok bool) {
	rest, found := strings.CutPrefix(e.Text, invalidPrefix)
	if e.Code != Err || !found {
		return "", "", false
	}
	arg, reason, found = strings.Cut(rest, ": ")
	if !found || arg == "" || strings.ContainsAny(arg, " \t") {
		return "", "", false
	}
	return arg, reason, true
}
