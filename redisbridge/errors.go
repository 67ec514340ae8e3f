package redisbridge

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fencerlock/fencer/rediscompat"
	"github.com/fencerlock/fencer/server"
	"github.com/fencerlock/fencer/wire"
	"github.com/tidwall/redcon"
)

// Error replies. Every error reply the bridge sends is written in this file,
// with a code of package wire (the contract, listed in docs/protocol.md):
// writeErr for an error of the node, writeError for the bridge's own,
// errorLine where a reply is written on the socket itself, writeRelayed for
// the Redis-compatible layer's replies. errors_test.go fails if another
// file writes one, or if an error of the node maps to no code.

// uncertainAdvice ends every UNCERTAIN reply.
const uncertainAdvice = "the command may or may not have taken effect: retry it with the same owner"

// Errors the bridge sends in Redis's words.
var (
	errNotInteger = wire.Error{Code: wire.Err, Text: "value is not an integer or out of range"}
	errSyntax     = wire.Error{Code: wire.Err, Text: "syntax error"}
)

// errMillis is the reply to a duration argument that is not a whole number
// of milliseconds: it names the argument, its unit and what came.
func errMillis(arg string, got []byte) wire.Error {
	return errArg(arg, "a whole number of milliseconds", got)
}

// errSessionID is the reply to a session ID that is not one.
func errSessionID(got []byte) wire.Error {
	return errArg("session", "a session ID (a whole number from FENCE.SESSION OPEN)", got)
}

// errArg is the reply to an argument that is not what its place wants.
func errArg(arg, want string, got []byte) wire.Error {
	return wire.FormatInvalidArgument(arg, fmt.Sprintf("want %s, got '%s'", want, truncate(got, 64)))
}

// errOption is the reply to an option a command does not take there.
func errOption(got []byte, want string) wire.Error {
	return wire.FormatInvalidArgument("option", fmt.Sprintf("'%s' is not one here: want %s", truncate(got, 64), want))
}

// errf is an ERR reply.
func errf(format string, args ...any) wire.Error {
	return wire.Error{Code: wire.Err, Text: fmt.Sprintf(format, args...)}
}

// replyOf is the reply to an error of the node (or of the Redis-compatible
// layer, which returns the node's errors). The code says whether anything
// was done: only UNCERTAIN leaves it open.
func replyOf(err error) wire.Error {
	text := strings.TrimPrefix(err.Error(), "server: ")
	var nl *server.NotLeaderError
	var arg *server.ArgumentError
	switch {
	case errors.As(err, &arg):
		return wire.FormatInvalidArgument(arg.Arg, arg.Reason)
	case errors.Is(err, server.ErrInvalidArgument):
		return wire.Error{Code: wire.Err, Text: text}
	case errors.Is(err, server.ErrUnknownOutcome):
		return wire.Error{Code: wire.Uncertain, Text: text + "; " + uncertainAdvice}
	case errors.As(err, &nl):
		return wire.FormatNotLeader(nl.Leader, nl.LeaderAddr)
	case errors.Is(err, server.ErrNotLeader): // not a *NotLeaderError: no leader named
		return wire.FormatNotLeader("", "")
	case errors.Is(err, server.ErrNotMember):
		return wire.Error{Code: wire.NoLeader, Text: "this node is not a member of a cluster (removed, or not yet joined); send commands to a member"}
	case errors.Is(err, server.ErrNoLeader):
		return wire.Error{Code: wire.NoLeader, Text: "no leader is available; retry later"}
	case errors.Is(err, server.ErrShutdown), errors.Is(err, context.Canceled):
		return wire.Error{Code: wire.Shutdown, Text: "the server is shutting down"}
	case errors.Is(err, context.DeadlineExceeded):
		// Not proposed: ctx ran out before the command reached Raft (a
		// command in flight is ErrUnknownOutcome, above).
		return wire.Error{Code: wire.Timeout, Text: "the request timed out before it took effect; retry later"}
	case errors.Is(err, server.ErrWrongType):
		return wire.Error{Code: wire.WrongType, Text: "Operation against a key holding the wrong kind of value"}
	case errors.Is(err, server.ErrConflict):
		return wire.Error{Code: wire.Timeout, Text: text + "; nothing was done: retry later"}
	case errors.Is(err, server.ErrLeaseLost):
		return wire.Error{Code: wire.LeaseLost, Text: text}
	case errors.Is(err, rediscompat.ErrReleased):
		return wire.Error{Code: wire.Released, Text: "this value released the key: it holds no lock on it and cannot write it or act on it again; nothing was done"}
	case errors.Is(err, server.ErrTransferRefused):
		// Nothing was done; the text says why.
		return wire.Error{Code: wire.Err, Text: text}
	case errors.Is(err, server.ErrNoSession):
		return wire.Error{Code: wire.NoSession, Text: "the session is not open (it expired, was closed or revoked); its locks are released: open a new one"}
	}
	return wire.Error{Code: wire.Err, Text: text}
}

// forwardFailed is the reply to a command whose forwarding to the leader at
// addr failed with err; sent says whether the command may have reached it.
func forwardFailed(addr string, sent bool, err error) wire.Error {
	if sent {
		return wire.Error{Code: wire.Uncertain, Text: fmt.Sprintf("forwarding to the leader at %s failed after sending: %v; %s", addr, err, uncertainAdvice)}
	}
	return wire.Error{Code: wire.NoLeader, Text: fmt.Sprintf("cannot reach the leader at %s: %v; retry later", addr, err)}
}

// writeErr answers an error of the node.
func writeErr(c redcon.Conn, err error) {
	writeError(c, replyOf(err))
}

// writeError answers e.
func writeError(c redcon.Conn, e wire.Error) {
	c.WriteError(e.String())
}

// errorLine is e as RESP, for a reply written on the socket itself.
func errorLine(e wire.Error) []byte {
	return redcon.AppendError(nil, e.String())
}

// writeRelayed answers an error reply of the Redis-compatible layer as it
// is: Redis's words, or a Lua script's own error, which keeps the code the
// script gave it (the one exception to wire's codes, as in Redis).
func writeRelayed(c redcon.Conn, reply string) {
	c.WriteError(reply)
}

// replyCode is the code of a raw RESP reply relayed from the leader, or ""
// if it is not an error reply.
func replyCode(raw []byte) wire.Code {
	if len(raw) == 0 || raw[0] != '-' {
		return ""
	}
	return wire.Parse(strings.TrimSuffix(string(raw[1:]), "\r\n")).Code
}
