package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Op is the kind of a log entry.
type Op uint8

// The operations of the lock table. Their numeric values are part of the log
// format: never renumber them.
const (
	// OpAcquire grants Key to Owner for TTL, or renews it if Owner holds it.
	OpAcquire Op = 1
	// OpExtend renews Owner's lease on Key for TTL.
	OpExtend Op = 2
	// OpRelease frees Key if Owner holds it and remembers the release
	// (with GiveUp, also when Owner holds nothing).
	OpRelease Op = 3
	// OpExpire frees Key if its lease is still the one named by Token and
	// Version (it was not renewed since the leader timed it).
	OpExpire Op = 4
	// OpRevoke frees Key administratively. With Owner and Token set it frees
	// only that grant. A revoke is not remembered as a release.
	OpRevoke Op = 5
	// OpGrant does nothing itself: it hands Key, if free, to its Waiter. The
	// leader sends it when a key is free while waiters queue for it.
	OpGrant Op = 6
	// OpMember records the client address (Owner) of cluster member Key, or
	// forgets the member if Owner is empty. It touches no lock.
	OpMember Op = 7
	// OpTxn is a transaction (Command.Txn): lock commands that take effect
	// together, in one entry, only if what the leader read to work them
	// out is unchanged (its guards), and otherwise not at all.
	OpTxn Op = 8
	// OpPut stores a value under Key, whatever it held: a string (Owner)
	// or a value of another Kind (Data), with TTL (zero: no expiry) or,
	// with KeepTTL, the key's own. (OpRevoke deletes a key of any kind.)
	OpPut Op = 9
	// OpSessionOpen opens a session with TTL: its ID is the command's
	// position. Owner is the user that opens it (empty without
	// authentication); Key is empty.
	OpSessionOpen Op = 10
	// OpSessionRenew restarts Session's TTL (a keepalive).
	OpSessionRenew Op = 11
	// OpSessionClose ends Session at its holder's request: every lock held
	// under it is released, and remembered as released, in this command;
	// Waiters name who each freed key is handed to.
	OpSessionClose Op = 12
	// OpSessionExpire ends Session if it is still the one the leader timed
	// (Lease.Version, its last renewal): its locks are freed, not
	// remembered, and handed to Waiters.
	OpSessionExpire Op = 13
	// OpSessionRevoke ends Session administratively, as an expiry does.
	OpSessionRevoke Op = 14
	// OpProclaim sets the value (Data) of a lock Owner holds under Session
	// (an election's leader's value), keeping its token.
	OpProclaim Op = 15
	// OpClusterID names the cluster: Key becomes its ID if it has none
	// (the first leader of a new cluster, or of one made before IDs,
	// proposes one; a later one does nothing). It touches no lock.
	OpClusterID Op = 16
	// OpFormat raises the cluster's format level to Level (format.go): the
	// leader commits it once every member reads that level, and from then
	// on writes what it brings. It touches no lock; a lower or equal level
	// than the table's does nothing (levels never go down).
	OpFormat Op = 17
)

// String names the operation.
func (o Op) String() string {
	switch o {
	case OpAcquire:
		return "acquire"
	case OpExtend:
		return "extend"
	case OpRelease:
		return "release"
	case OpExpire:
		return "expire"
	case OpRevoke:
		return "revoke"
	case OpGrant:
		return "grant"
	case OpMember:
		return "member"
	case OpTxn:
		return "txn"
	case OpPut:
		return "put"
	case OpSessionOpen:
		return "session-open"
	case OpSessionRenew:
		return "session-renew"
	case OpSessionClose:
		return "session-close"
	case OpSessionExpire:
		return "session-expire"
	case OpSessionRevoke:
		return "session-revoke"
	case OpProclaim:
		return "proclaim"
	case OpClusterID:
		return "cluster-id"
	case OpFormat:
		return "format"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// EncodingVersion is the version byte that starts every entry holding one
// command.
const EncodingVersion byte = 1

// BatchVersion is the version byte of an entry that holds several commands
// (group commit): after it, a uvarint count of at least two, then each
// command as a uvarint length and its Encode form.
const BatchVersion byte = 2

// TxnVersion is the version byte of a transaction (OpTxn): after it, its
// guards, scans and commands as Txn.layout describes them, each command in
// its Encode form (version 1). A transaction may stand alone in an entry or
// be one command of a batch.
const TxnVersion byte = 3

// Limits of the encoding. The decoder rejects longer strings as corrupt;
// the server refuses lock names and owners longer than MaxStringLen (its
// configured limits, 1 KiB by default, may not exceed it), so an entry, with
// at most three such strings, stays under MaxEntrySize: far below what the
// Raft log, its transport and a snapshot can carry.
const (
	// MaxStringLen is the longest key or owner (a string's value) the
	// decoder accepts.
	MaxStringLen = 64 << 10
	// MaxValueLen is the longest value of another kind (a put's data) the
	// decoder accepts.
	MaxValueLen = 1 << 20
	// MaxEntrySize bounds an encoded entry.
	MaxEntrySize = 2 << 20
)

// LeaseRef names one lease of a key: the grant's token and the position of
// the entry that last granted or extended it.
type LeaseRef struct {
	Token   uint64
	Version uint64
}

// Waiter is a queued acquire that an entry hands the lock to if the lock is
// free after the entry's own command.
type Waiter struct {
	Owner string
	TTL   uint64 // milliseconds; zero under a session
	// Session, if not zero, is the session the waiter acquires under; the
	// hand-off is refused if it is no longer open.
	Session uint64
	// Value is the lock's value once granted (under a session only).
	Value string
	// Mode and Permits make the waiter a shared acquire (see
	// Command.Mode); ModeNone: a plain lock's.
	Mode    Mode
	Permits uint64
}

// Mode is what kind of grant of a key an acquire asks for: a plain lock
// (ModeNone), or a holder of a shared key: a read-write lock's reader or
// writer, or one permit of a semaphore. Its values are part of the log and
// snapshot formats.
type Mode uint8

// The modes.
const (
	ModeNone   Mode = 0
	ModeRead   Mode = 1
	ModeWrite  Mode = 2
	ModePermit Mode = 3
)

var modeNames = [...]string{ModeNone: "lock", ModeRead: "read", ModeWrite: "write", ModePermit: "permit"}

// String names the mode as the protocol does.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// KeyWaiter is a waiter for one of the keys a session's end frees.
type KeyWaiter struct {
	Key string
	Waiter
}

// Command is one decoded log entry.
type Command struct {
	Op    Op
	Key   string
	Owner string // acquire, extend, release; optional for revoke
	TTL   uint64 // milliseconds; acquire, extend

	// Lease names the lease that an expire frees, that a revoke frees (zero
	// Token: any), or that an acquire or extend first frees because the
	// leader saw it run out (nil: none).
	Lease *LeaseRef

	// Waiter, if set, is granted the key after the command if the key is
	// then free.
	Waiter *Waiter

	// Redis selects Redis's semantics for acquire and release, as SET NX and
	// the Redlock scripts have them: an acquire of a held key is refused even
	// for its holder, a release is not remembered, and a remembered release
	// does not refuse the acquire.
	Redis bool

	// GiveUp, on a release outside a session and without Redis, remembers
	// it even if Owner does not hold Key (token 0: nothing was released):
	// the owner gave up, so an acquire or hand-off of Key to it that comes
	// after is refused until someone else is granted Key after the release
	// (Table.refuses). Releases without it are not remembered when Owner
	// holds nothing, as before it existed: entries written then apply as
	// they did.
	GiveUp bool

	// Txn holds the guards and commands of an OpTxn (and nothing else).
	Txn *Txn

	// Session is the session an acquire, release or proclaim acts under
	// (zero: none), or the session a session command names. On a revoke
	// it names the lock's session when the leader revokes a grant that
	// reached no caller (not counted as taken from the session).
	Session uint64
	// Waiters, on a session's end, name the waiter each freed key is
	// handed to, in increasing key order; keys not named are freed
	// without a hand-off (the leader hands them over in later entries).
	Waiters []KeyWaiter

	// Kind, Data and KeepTTL belong to an OpPut: the value's kind, the
	// value of a kind other than a string, and whether the key keeps its
	// TTL. Data is also the value an acquire under a session or a proclaim
	// gives the lock (an election's leader's value).
	Kind    Kind
	Data    string
	KeepTTL bool

	// Mode, on an acquire, asks for a holder of a shared key (KindShared)
	// instead of a plain lock: a reader or the writer of a read-write
	// lock, or a permit of a semaphore of Permits permits.
	Mode Mode
	// Level is an OpFormat's format level (at least 1). (A byte, beside
	// Mode: the struct keeps its size.)
	Level   uint8
	Permits uint64
}

// flags of the encoding.
const (
	flagLease  = 1 << 0
	flagWaiter = 1 << 1
	flagRedis  = 1 << 2
	flagKeep   = 1 << 3 // OpPut: KeepTTL
	// flagSession: a uvarint session follows (the command's, then the
	// waiter's if flagWaiter), then Data for an acquire or proclaim.
	flagSession = 1 << 4
	flagWaiters = 1 << 5 // a session end's waiters follow
	// flagShared: the shared part follows: the command's mode and
	// permits, then the waiter's if flagWaiter, then each session end
	// waiter's if flagWaiters.
	flagShared = 1 << 6
	// flagGiveUp: Command.GiveUp (no part of its own).
	flagGiveUp = 1 << 7
	flagKnown  = flagLease | flagWaiter | flagRedis | flagKeep | flagSession | flagWaiters | flagShared | flagGiveUp
)

// Decoding errors.
var (
	// ErrShortEntry means the entry ended before its fields did.
	ErrShortEntry = errors.New("fsm: entry is truncated")
	// ErrEntryVersion means the entry was written by an unknown encoding.
	ErrEntryVersion = errors.New("fsm: unknown entry encoding version")
	// ErrBadEntry means the entry's fields are not a valid command.
	ErrBadEntry = errors.New("fsm: malformed entry")
)

// Encode appends the binary form of c to dst and returns it: the version
// byte, the op, the flags (flags below), then the fields the layout method
// lists. A transaction has its own form (TxnVersion).
func (c Command) Encode(dst []byte) []byte {
	if c.Op == OpTxn {
		return c.Txn.encode(dst)
	}
	flags := c.flags()
	dst = append(dst, EncodingVersion, byte(c.Op), flags)
	k := codec{mode: encoding, buf: dst}
	c.layout(&k, flags)
	return k.buf
}

// flags returns the flags of c's encoding: which optional parts it has.
func (c *Command) flags() byte {
	var flags byte
	if c.Lease != nil {
		flags |= flagLease
	}
	if c.Waiter != nil {
		flags |= flagWaiter
	}
	if c.Redis {
		flags |= flagRedis
	}
	if c.KeepTTL {
		flags |= flagKeep
	}
	if c.hasSessionPart() {
		flags |= flagSession
	}
	if len(c.Waiters) > 0 {
		flags |= flagWaiters
	}
	if c.hasSharedPart() {
		flags |= flagShared
	}
	if c.GiveUp {
		flags |= flagGiveUp
	}
	return flags
}

// layout is the one description of a plain command's encoding (version 1)
// after its version, op and flags bytes: Encode, Decode and encodedLen each
// walk it with a codec of their mode, so the three cannot disagree. Strings
// are a uvarint length and the bytes; a value is a string that may be up
// to MaxValueLen long.
//
//	key, owner (a value for OpPut: a string's value), uvarint TTL
//	flagLease:   uvarint token, uvarint version
//	flagWaiter:  the waiter's owner, its uvarint TTL
//	OpPut:       kind byte, data (value)
//	flagSession: uvarint session; with flagWaiter the waiter's uvarint
//	             session and value; for an acquire or proclaim, data (value)
//	flagWaiters: uvarint count (at least one), then each session end's
//	             waiter: key, owner, uvarint TTL, uvarint session, value
//	flagShared:  mode byte, uvarint permits; with flagWaiter the waiter's
//	             mode and permits; then each session end waiter's
//	OpFormat:    level byte
//
// A part is present only if its flag is (the session and shared parts came
// later: commands without them encode exactly as before they existed).
// Decode allocates Lease and Waiter from the flags before the walk and
// checks what the walk read after it.
func (c *Command) layout(k *codec, flags byte) {
	k.str(&c.Key)
	if c.Op == OpPut {
		k.value(&c.Owner)
	} else {
		k.str(&c.Owner)
	}
	k.uvarint(&c.TTL)
	if flags&flagLease != 0 {
		k.uvarint(&c.Lease.Token)
		k.uvarint(&c.Lease.Version)
	}
	if flags&flagWaiter != 0 {
		k.str(&c.Waiter.Owner)
		k.uvarint(&c.Waiter.TTL)
	}
	if c.Op == OpPut {
		k.byte((*byte)(&c.Kind))
		k.value(&c.Data)
	}
	if flags&flagSession != 0 {
		k.uvarint(&c.Session)
		if flags&flagWaiter != 0 {
			k.uvarint(&c.Waiter.Session)
			k.value(&c.Waiter.Value)
		}
		if c.Op == OpAcquire || c.Op == OpProclaim {
			k.value(&c.Data)
		}
	}
	if flags&flagWaiters != 0 {
		if n, ok := k.count(len(c.Waiters), minKeyWaiterLen, true, "%d waiters in %d bytes"); ok && k.mode == decoding {
			c.Waiters = make([]KeyWaiter, n)
		}
		for i := range c.Waiters {
			w := &c.Waiters[i]
			k.str(&w.Key)
			k.str(&w.Owner)
			k.uvarint(&w.TTL)
			k.uvarint(&w.Session)
			k.value(&w.Value)
		}
	}
	if flags&flagShared != 0 {
		k.byte((*byte)(&c.Mode))
		k.uvarint(&c.Permits)
		if flags&flagWaiter != 0 {
			k.byte((*byte)(&c.Waiter.Mode))
			k.uvarint(&c.Waiter.Permits)
		}
		for i := range c.Waiters {
			k.byte((*byte)(&c.Waiters[i].Mode))
			k.uvarint(&c.Waiters[i].Permits)
		}
	}
	if c.Op == OpFormat {
		k.byte(&c.Level)
	}
}

// hasSharedPart reports whether c's encoding has the shared part: a mode
// on the command or any of its waiters. Commands without one encode
// exactly as before shared keys existed.
func (c *Command) hasSharedPart() bool {
	if c.Mode != ModeNone || c.Waiter != nil && c.Waiter.Mode != ModeNone {
		return true
	}
	for _, w := range c.Waiters {
		if w.Mode != ModeNone {
			return true
		}
	}
	return false
}

// hasSessionPart reports whether c's encoding has the session part: a
// session, a waiter's session or a session value. Commands without one
// encode exactly as before sessions existed.
func (c *Command) hasSessionPart() bool {
	return c.Session != 0 || c.Waiter != nil && c.Waiter.Session != 0 ||
		(c.Op == OpAcquire || c.Op == OpProclaim) && c.Data != ""
}

// Decode parses an entry written by Encode. It rejects unknown versions,
// unknown operations, unknown flags, oversized strings and trailing bytes.
func Decode(b []byte) (Command, error) {
	var c Command
	d := decoder{b: b}
	ver := d.byte()
	if d.err != nil {
		return c, d.err
	}
	if ver == TxnVersion {
		return decodeTxn(d)
	}
	if ver != EncodingVersion {
		return c, fmt.Errorf("%w %d", ErrEntryVersion, ver)
	}
	c.Op = Op(d.byte())
	flags := d.byte()
	if flags&flagLease != 0 {
		c.Lease = &LeaseRef{}
	}
	if flags&flagWaiter != 0 {
		c.Waiter = &Waiter{}
	}
	c.Redis = flags&flagRedis != 0
	c.KeepTTL = flags&flagKeep != 0
	c.GiveUp = flags&flagGiveUp != 0
	k := codec{mode: decoding, d: d}
	c.layout(&k, flags)
	d = k.d
	if d.err == nil && flags&flagSession != 0 && !c.hasSessionPart() {
		return Command{}, fmt.Errorf("%w: empty session part", ErrBadEntry)
	}
	for i, w := range c.Waiters {
		if d.err == nil && (w.Key == "" || w.Owner == "" || i > 0 && w.Key <= c.Waiters[i-1].Key) {
			return Command{}, fmt.Errorf("%w: session waiters not in increasing key order", ErrBadEntry)
		}
	}
	if d.err == nil && flags&flagShared != 0 && !c.hasSharedPart() {
		return Command{}, fmt.Errorf("%w: empty shared part", ErrBadEntry)
	}
	if d.err != nil {
		return Command{}, d.err
	}
	if len(d.b) != 0 {
		return Command{}, fmt.Errorf("%w: %d trailing bytes", ErrBadEntry, len(d.b))
	}
	if flags&^flagKnown != 0 {
		return Command{}, fmt.Errorf("%w: unknown flags %#x", ErrBadEntry, flags)
	}
	if err := c.validate(); err != nil {
		return Command{}, err
	}
	return c, nil
}

// JoinEntries appends to dst one entry that holds the commands of entries,
// each the Encode form of one command, in order: that entry itself if there is
// one, else the batch form. Apply applies a batch's commands one after the
// other as if each had an entry of its own (see Table.Apply for their
// positions and tokens).
func JoinEntries(dst []byte, entries [][]byte) []byte {
	if len(entries) == 1 {
		return append(dst, entries[0]...)
	}
	dst = append(dst, BatchVersion)
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	for _, e := range entries {
		dst = binary.AppendUvarint(dst, uint64(len(e)))
		dst = append(dst, e...)
	}
	return dst
}

// DecodeEntry parses an entry written by Encode or JoinEntries into its
// commands. A batch must hold at least two commands, each valid as
// Decode has it, with nothing after the last: so the same commands have
// exactly one encoding.
func DecodeEntry(b []byte) ([]Command, error) {
	if len(b) > 0 && (b[0] == EncodingVersion || b[0] == TxnVersion) {
		c, err := Decode(b)
		if err != nil {
			return nil, err
		}
		return []Command{c}, nil
	}
	d := decoder{b: b}
	ver := d.byte()
	if d.err != nil {
		return nil, d.err
	}
	if ver != BatchVersion {
		return nil, fmt.Errorf("%w %d", ErrEntryVersion, ver)
	}
	n := d.uvarint()
	switch {
	case d.err != nil:
		return nil, d.err
	case n < 2:
		return nil, fmt.Errorf("%w: batch of %d commands", ErrBadEntry, n)
	case n > uint64(len(d.b))/minEncodedLen:
		return nil, fmt.Errorf("%w: batch of %d commands in %d bytes", ErrBadEntry, n, len(d.b))
	}
	cmds := make([]Command, 0, n)
	for range n {
		size := d.uvarint()
		if d.err != nil {
			return nil, d.err
		}
		if uint64(len(d.b)) < size {
			return nil, ErrShortEntry
		}
		c, err := Decode(d.b[:size])
		if err != nil {
			return nil, fmt.Errorf("command %d of the batch: %w", len(cmds), err)
		}
		cmds = append(cmds, c)
		d.b = d.b[size:]
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrBadEntry, len(d.b))
	}
	return cmds, nil
}

// minEncodedLen is the fewest bytes a command takes in a batch: its length,
// version, op, flags, an empty key and owner (a session's open), a TTL of
// one byte.
const minEncodedLen = 1 + 3 + 1 + 1 + 1

// minKeyWaiterLen is the fewest bytes a session end's waiter takes: a key
// and an owner of one byte, a TTL, a session and an empty value.
const minKeyWaiterLen = 2 + 2 + 1 + 1 + 1

// validate checks the fields each operation needs.
func (c *Command) validate() error {
	if c.GiveUp && (c.Op != OpRelease || c.Redis || c.Session != 0 || c.Mode != ModeNone) {
		return fmt.Errorf("%w: give-up flag on a %s, a Redis release or one under a session", ErrBadEntry, c.Op)
	}
	if c.Op.IsSession() {
		return c.validateSession()
	}
	if c.Op == OpFormat {
		// Any level decodes, so that a node that reads less than it
		// names stops with a message saying so (Table.applyFormat).
		if c.Key != "" || c.Owner != "" || c.TTL != 0 || c.Level == 0 || c.flags() != 0 || c.Data != "" || c.Session != 0 {
			return fmt.Errorf("%w: format entry with a key, owner, TTL, flags or level 0", ErrBadEntry)
		}
		return nil
	}
	if len(c.Waiters) > 0 {
		return fmt.Errorf("%w: waiters on a %s", ErrBadEntry, c.Op)
	}
	if c.Key == "" {
		return fmt.Errorf("%w: empty key", ErrBadEntry)
	}
	switch {
	case c.Session != 0 && c.Op != OpAcquire && c.Op != OpRelease && c.Op != OpProclaim && c.Op != OpRevoke:
		return fmt.Errorf("%w: session on a %s", ErrBadEntry, c.Op)
	case c.Session != 0 && (c.TTL != 0 || c.Redis):
		return fmt.Errorf("%w: %s under a session with a TTL or Redis flag", ErrBadEntry, c.Op)
	case c.Data != "" && c.Op == OpAcquire && c.Session == 0:
		return fmt.Errorf("%w: acquire value outside a session", ErrBadEntry)
	case c.Waiter != nil && c.Waiter.Session != 0 && c.Waiter.TTL != 0,
		c.Waiter != nil && c.Waiter.Session == 0 && c.Waiter.Value != "":
		return fmt.Errorf("%w: waiter under a session with a TTL, or with a value outside one", ErrBadEntry)
	}
	if c.Waiter != nil && c.Waiter.Owner == "" {
		return fmt.Errorf("%w: waiter without owner", ErrBadEntry)
	}
	if err := c.validateShared(); err != nil {
		return err
	}
	if c.KeepTTL && c.Op != OpPut {
		return fmt.Errorf("%w: keep-TTL flag on a %s", ErrBadEntry, c.Op)
	}
	switch c.Op {
	case OpAcquire, OpExtend, OpRelease:
		if c.Owner == "" {
			return fmt.Errorf("%w: %s without owner", ErrBadEntry, c.Op)
		}
	case OpExpire:
		if c.Lease == nil {
			return fmt.Errorf("%w: expire without lease", ErrBadEntry)
		}
	case OpRevoke:
	case OpGrant:
		if c.Waiter == nil {
			return fmt.Errorf("%w: grant without waiter", ErrBadEntry)
		}
	case OpMember:
		if c.Lease != nil || c.Waiter != nil {
			return fmt.Errorf("%w: member entry with lease or waiter", ErrBadEntry)
		}
	case OpClusterID:
		if c.Owner != "" || c.Data != "" || c.TTL != 0 || c.Redis || c.Lease != nil || c.Waiter != nil {
			return fmt.Errorf("%w: cluster ID entry with an owner, value, TTL, lease or waiter", ErrBadEntry)
		}
	case OpTxn:
		return fmt.Errorf("%w: txn in the version 1 encoding", ErrBadEntry)
	case OpProclaim:
		if c.Owner == "" || c.Session == 0 || c.Lease != nil || c.Waiter != nil {
			return fmt.Errorf("%w: proclaim without owner or session, or with lease or waiter", ErrBadEntry)
		}
	case OpPut:
		switch {
		case c.Lease != nil || c.Waiter != nil || c.Redis:
			return fmt.Errorf("%w: put with lease, waiter or Redis flag", ErrBadEntry)
		case !c.Kind.valid():
			return fmt.Errorf("%w: unknown kind %d", ErrBadEntry, c.Kind)
		case c.Kind == KindString && c.Data != "", c.Kind != KindString && c.Owner != "":
			return fmt.Errorf("%w: put of a %d with the other kind's field", ErrBadEntry, c.Kind)
		case c.KeepTTL && c.TTL != 0:
			return fmt.Errorf("%w: put that keeps the TTL and sets one", ErrBadEntry)
		}
	default:
		return fmt.Errorf("%w: unknown op %d", ErrBadEntry, uint8(c.Op))
	}
	return nil
}

// IsSession reports whether o is one of the session commands, which name a
// session and no key.
func (o Op) IsSession() bool { return o >= OpSessionOpen && o <= OpSessionRevoke }

// validateSession checks a session command: no key, owner or Redis flag;
// an open has a TTL and no session, the others a session; only an end has
// waiters (and Expire its lease ref: the renewal it ends).
func (c *Command) validateSession() error {
	bad := c.Key != "" || c.Owner != "" && c.Op != OpSessionOpen || c.Redis || c.Waiter != nil || c.Data != ""
	switch c.Op {
	case OpSessionOpen:
		bad = bad || c.TTL == 0 || c.Session != 0 || c.Lease != nil || len(c.Waiters) > 0
	case OpSessionRenew:
		bad = bad || c.TTL != 0 || c.Session == 0 || c.Lease != nil || len(c.Waiters) > 0
	case OpSessionExpire:
		bad = bad || c.TTL != 0 || c.Session == 0 || c.Lease == nil
	default: // close, revoke
		bad = bad || c.TTL != 0 || c.Session == 0 || c.Lease != nil
	}
	for _, w := range c.Waiters {
		if w.Session != 0 && w.TTL != 0 || w.Session == 0 && w.Value != "" || validMode(w.Mode, w.Permits) != nil {
			bad = true
		}
	}
	bad = bad || c.Mode != ModeNone || c.Permits != 0
	if bad {
		return fmt.Errorf("%w: malformed %s", ErrBadEntry, c.Op)
	}
	return nil
}

// encodedLen is len(c.Encode(nil)) for a plain command.
func (c Command) encodedLen() int {
	k := codec{mode: sizing}
	c.layout(&k, c.flags())
	return 3 + k.n
}

// validateShared checks the shared part: a mode only on an acquire (and on
// waiters), permits exactly with ModePermit, and no Redis semantics.
func (c *Command) validateShared() error {
	if c.Mode != ModeNone && (c.Op != OpAcquire || c.Redis) {
		return fmt.Errorf("%w: mode on a %s, or with the Redis flag", ErrBadEntry, c.Op)
	}
	if err := validMode(c.Mode, c.Permits); err != nil {
		return err
	}
	if c.Waiter != nil {
		return validMode(c.Waiter.Mode, c.Waiter.Permits)
	}
	return nil
}

// validMode checks a mode and its permits.
func validMode(m Mode, permits uint64) error {
	switch {
	case m > ModePermit:
		return fmt.Errorf("%w: unknown mode %d", ErrBadEntry, m)
	case (m == ModePermit) != (permits != 0):
		return fmt.Errorf("%w: %d permits with mode %s", ErrBadEntry, permits, m)
	}
	return nil
}
