package wire

// Code is the first word of an error reply.
type Code string

// fencer's own codes. None of them is a "no": a lock that another owner
// holds is a null reply, never an error.
const (
	// Uncertain: the command may or may not have taken effect. It was
	// proposed, and then leadership was lost, the request's deadline passed
	// while its entry was in flight, or forwarding it to the leader failed
	// after it was sent. Never read it as "not granted". Retry the native
	// FENCE.ACQUIRE, EXTEND and RELEASE with the same owner, on any node:
	// they are idempotent. A Redis command keeps Redis's semantics (a
	// second SET NX is refused even with the same value): read the key
	// (GET, or FENCE.TOKEN key value) before sending it again.
	Uncertain Code = "UNCERTAIN"
	// NotLeader: this node is not the leader and did not forward the
	// command: it came over a forwarding connection (a node forwards once),
	// or the leader's client address was not known within the deadline.
	// Nothing was done. Its fields name the leader (FormatNotLeader,
	// ParseNotLeader): retry at the leader's address if it is given,
	// otherwise on any node, after a pause.
	NotLeader Code = "NOTLEADER"
	// NoLeader: no leader was available within the request's deadline, the
	// leader could not be reached before anything was sent to it, or this
	// node is in no cluster (removed, or waiting to join). Nothing was
	// done. Retry after a pause, on this node or another.
	NoLeader Code = "NOLEADER"
	// Timeout: the request's deadline passed before the command was
	// proposed (also while it waited in the leader's queue for the next
	// entry: it was withdrawn), or a command of several steps found the
	// keys it read changed under it every time it was about to take
	// effect, and gave up. Nothing was done. Retry, after a pause.
	Timeout Code = "TIMEOUT"
	// Shutdown: the node is shutting down (or the request was ended, the
	// client having hung up). The command was not proposed. Retry on
	// another node.
	Shutdown Code = "SHUTDOWN"
	// NoSession: the command named a session that is not open: it
	// expired, was closed or revoked, or never was. Nothing was done, and
	// every lock held under that session is free (or handed on). Open a
	// new session; do not retry with the same one.
	NoSession Code = "NOSESSION"
	// Released: with --redlock-multi-endpoint, a write of a string whose
	// value made the key's newest remembered release, or a script that
	// acted on a key after reading it as still held by a value that
	// released it (anything but the DEL that completes the release).
	// Nothing was done: the value holds no lock on the key. A lock client
	// reads it as a failed vote; take the lock again with a new value.
	// (Where Redis has a "not done" reply, SET NX and XX, SETNX and
	// MSETNX, that reply is given instead.)
	Released Code = "RELEASED"
	// LeaseLost: FENCE.MACQUIRE sent again (after UNCERTAIN) found that an
	// earlier attempt had been granted and that the owner holds only some
	// of its keys now (the others ran out or were taken). The keys it
	// still held were released by this command: nothing is held. Never
	// "not granted": the lease existed and is lost. Take the locks again
	// with a new owner.
	LeaseLost Code = "LEASELOST"
)

// Redis's codes, sent with Redis's meaning.
const (
	// Err: the request is wrong (arity, syntax, a value out of range, an
	// invalid argument, an unknown command or subcommand), a configured
	// limit refused it, FENCE.REMOVE or FENCE.TRANSFER named no member, or
	// a Lua script failed at run time. Nothing was done, except that a
	// script keeps the writes it made before its run-time error, as in
	// Redis. The same request gets the same answer: fix it. A limit (on
	// the locks held, on the commands pipelined in one read) may pass.
	// Malformed RESP framing gets "ERR Protocol error: ..." and the
	// connection is closed; so is a connection over the client limit.
	Err Code = "ERR"
	// WrongType: the command named a key that holds a value of another
	// kind (a lock command, a hash). Nothing was done. Use another key.
	WrongType Code = "WRONGTYPE"
	// NoAuth: authentication is required and the connection has not
	// authenticated. Nothing was done. AUTH (or HELLO ... AUTH), then
	// retry.
	NoAuth Code = "NOAUTH"
	// WrongPass: AUTH failed: a wrong password, or no such user. Nothing
	// was done. Retrying with the same credentials fails again.
	WrongPass Code = "WRONGPASS"
	// NoPerm: the authenticated user may not touch that key or run that
	// command. Nothing was done. Retrying fails again.
	NoPerm Code = "NOPERM"
	// NoScript: EVALSHA of a script this node has not cached. Nothing was
	// done. Send the script with EVAL (or SCRIPT LOAD it first).
	NoScript Code = "NOSCRIPT"
	// NoProto: HELLO asked for a RESP version other than 2 or 3. Nothing
	// was done.
	NoProto Code = "NOPROTO"
	// NotBusy: SCRIPT KILL found no script running (fencer stops a script
	// at its time limit itself). Nothing was done.
	NotBusy Code = "NOTBUSY"
)

// codes lists every code, in the order of docs/protocol.md's table.
var codes = []Code{Uncertain, NotLeader, NoLeader, Timeout, Shutdown, NoSession, LeaseLost, Released,
	Err, WrongType, NoAuth, WrongPass, NoPerm, NoScript, NoProto, NotBusy}

// Codes returns every code fencerd sends an error reply with.
func Codes() []Code { return append([]Code(nil), codes...) }

// Known reports whether c is one of Codes.
func (c Code) Known() bool {
	for _, k := range codes {
		if c == k {
			return true
		}
	}
	return false
}
