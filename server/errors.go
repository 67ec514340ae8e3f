package server

import (
	"errors"
	"fmt"
)

// Errors returned by Node. Business outcomes (a lock held by another owner,
// an extend by a non-holder) are not errors: they are results.
var (
	// ErrInvalidArgument means the request itself is wrong: an empty or
	// oversized key or owner, a TTL or wait out of range. Nothing was
	// proposed.
	ErrInvalidArgument = errors.New("server: invalid argument")
	// ErrNoLeader means no leader is known; nothing was proposed. Retry later.
	ErrNoLeader = errors.New("server: no leader")
	// ErrNotLeader means this node is not the leader; nothing was proposed.
	// The error is a *NotLeaderError naming the leader if one is known.
	ErrNotLeader = errors.New("server: not the leader")
	// ErrUnknownOutcome means the command may or may not have been
	// committed: leadership was lost after it was proposed, or the caller's
	// deadline passed while it was in flight. It is never a "no". Repeating
	// a native acquire, extend or release with the same owner is safe.
	ErrUnknownOutcome = errors.New("server: outcome unknown")
	// ErrNotMember means this node is in no cluster: it was removed, or it
	// waits to be added (fencerd --join). Nothing was proposed. It wraps
	// ErrNoLeader: ask another node.
	ErrNotMember = fmt.Errorf("%w: this node is not a member of a cluster (removed, or not yet joined)", ErrNoLeader)
	// ErrUnknownMember means FENCE.REMOVE named a node that is not a member.
	ErrUnknownMember = errors.New("server: no such member")
	// ErrLeaseLost means a multi-key acquire, sent again (after an unknown
	// outcome), found that an earlier attempt had been granted and that the
	// owner no longer holds all of its keys: some ran out or were taken.
	// The keys still held were released with the answer; nothing is held.
	// Take the locks again with a new owner.
	ErrLeaseLost = errors.New("server: lease lost")
	// ErrTransferRefused means a leadership transfer could not start: its
	// target is the leader itself or not a voter, there is no other voter,
	// or another transfer is in progress. Nothing was done; the error says
	// why.
	ErrTransferRefused = errors.New("server: leadership transfer refused")
	// ErrDataDirInUse means another process holds the data directory's Raft
	// store open.
	ErrDataDirInUse = errors.New("server: data directory in use")
	// ErrShutdown means the node is shutting down; nothing was proposed.
	ErrShutdown = errors.New("server: shutting down")
	// ErrNotReady is wrapped by Node.Ready's answers: the node cannot serve
	// requests now; the message says why.
	ErrNotReady = errors.New("server: not ready")
	// ErrLostMember means a node without Raft state is named, with a
	// recorded client address, in the configuration of a cluster that
	// formed (DecideFormation): it ran as a member and its state was lost.
	// Letting Raft pull it in would let it vote with an empty log.
	ErrLostMember = errors.New("server: a member of the cluster without its state")
	// ErrTwoClusters means the servers a node forming a cluster reached
	// belong to two clusters (DecideFormation): it joins neither.
	ErrTwoClusters = errors.New("server: the --join addresses belong to two clusters")
	// ErrRestoreNotNew means RestoreSnapshot was called on a node that is
	// not a fresh one-node cluster: restore only into a new data directory.
	ErrRestoreNotNew = errors.New("server: restore needs a new cluster")
	// ErrConflict means a transaction (Node.Update) found the keys it read
	// changed every time it was about to take effect, and gave up: nothing
	// was done. Retry later.
	ErrConflict = errors.New("server: too much contention on the keys")
	// ErrWrongType means a lock command named a key that holds a value of
	// another kind (a hash, say); nothing was proposed.
	ErrWrongType = errors.New("server: the key holds a value of another kind")
	// ErrLimit means a configured limit (Config.MaxLocks) refused the
	// request; nothing was proposed.
	ErrLimit = errors.New("server: limit reached")
	// ErrNoSession means the request named a session that is not open (it
	// expired, was closed or revoked, or never was); nothing was done. Open
	// a new session.
	ErrNoSession = errors.New("server: no such session")
	// ErrFormatRefused means a server asked to join (or to be recorded)
	// reads only format levels below the cluster's (docs/compatibility.md):
	// it would misread what the cluster writes. Nothing was changed; the
	// message names both levels.
	ErrFormatRefused = errors.New("server: the joining server cannot read the cluster's format level")
	// ErrUnreadableFormat means this node applied or was sent data of a
	// format level (or snapshot version) above what it reads: it stopped
	// applying (Node.Stopped) and refuses to start on its data directory
	// until a build that reads that level runs on it. The message names
	// the levels and this build's version.
	ErrUnreadableFormat = errors.New("server: the cluster's data is in a format this build cannot read")
)

// NotLeaderError is returned when a command reaches a node that is not the
// leader. Leader is the leader's Raft ID and LeaderAddr its client address,
// each empty if not known.
type NotLeaderError struct {
	Leader     string
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return "server: not the leader; no leader known"
	}
	if e.LeaderAddr == "" {
		return fmt.Sprintf("server: not the leader; leader is %s", e.Leader)
	}
	return fmt.Sprintf("server: not the leader; leader is %s at %s", e.Leader, e.LeaderAddr)
}

// Unwrap makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// ArgumentError is the ErrInvalidArgument of a request, naming the argument
// that is wrong (key, owner, ttl, wait, id, address, command), so that a
// caller can act on which one it was.
type ArgumentError struct {
	Arg    string
	Reason string
}

func (e *ArgumentError) Error() string {
	return "server: invalid argument: " + e.Arg + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrInvalidArgument) true.
func (e *ArgumentError) Unwrap() error { return ErrInvalidArgument }

func invalid(arg, format string, args ...any) error {
	return &ArgumentError{Arg: arg, Reason: fmt.Sprintf(format, args...)}
}
