package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"github.com/fencerlock/fencer/wire"
	"github.com/redis/go-redis/v9"
)

// Errors returned by the client. The errors returned wrap them with details
// (the lock, the node, the server's message); test for them with errors.Is.
// A cancelled or expired context is reported by wrapping ctx.Err(), so
// errors.Is(err, context.Canceled) and errors.Is(err, context.DeadlineExceeded)
// work as usual.
var (
	// ErrLocked means another owner holds the lock (for a read-write lock,
	// a holder of the other side, or a waiter ahead; for a semaphore, every
	// permit; for several keys, any of them). It is also returned when
	// the server remembers this owner's own release of the lock: an owner
	// value serves one lease only.
	ErrLocked = errors.New("client: lock held by another owner")
	// ErrWrongType means the key is a lock of another kind: a plain lock
	// asked for as a read-write lock or a semaphore, or the other way
	// round. Nothing was done.
	ErrWrongType = errors.New("client: the key is a lock of another kind")
	// ErrLeaseLost means a lease ended without being released: the server
	// said its owner no longer holds the lock, or the client-side validity
	// ran out before a renewal succeeded. Work done under the lease after
	// that is unprotected; the fencing token is what keeps it out of storage.
	ErrLeaseLost = errors.New("client: lease lost")
	// ErrReleased is the cause of a released lease's context (see
	// context.Cause).
	ErrReleased = errors.New("client: lease released")
	// ErrNoLeader means no node could serve the request: every address was
	// unreachable, or the cluster had no leader, for the whole failover
	// timeout (see WithFailoverTimeout).
	ErrNoLeader = errors.New("client: no leader reachable")
	// ErrInvalidArgument means the request itself is wrong (an empty name, a
	// TTL the server does not allow, a malformed address); nothing was done.
	ErrInvalidArgument = errors.New("client: invalid argument")
	// ErrClosed means the Client was closed.
	ErrClosed = errors.New("client: closed")
	// ErrAuth means the server refused the client's credentials (WRONGPASS:
	// a wrong password or an unknown user; see WithAuth), or requires
	// credentials the client did not give (NOAUTH). It is not retried on
	// other nodes: the nodes of a cluster share their users.
	ErrAuth = errors.New("client: authentication failed")
	// ErrNoPerm means the server refused the request because the
	// authenticated user may not touch that lock (its name is outside the
	// user's pattern) or run that command (cluster administration needs a
	// user with pattern *). Nothing was done.
	ErrNoPerm = errors.New("client: permission denied")
	// ErrTLS means a TLS connection to a node failed for a reason that
	// retrying does not cure: the node's certificate did not verify, the
	// node refused the client's certificate or its absence, or the node
	// does not speak TLS. See WithTLS.
	ErrTLS = errors.New("client: TLS handshake failed")
	// ErrSessionEnded means the server says the session is not open (it
	// expired, was closed or revoked): every lock held under it is gone.
	// Errors that wrap it also wrap ErrLeaseLost.
	ErrSessionEnded = fmt.Errorf("%w: the session ended", ErrLeaseLost)
	// ErrValueReleased means a server run with --redlock-multi-endpoint
	// refused a write, through its Redis-compatible commands, of a value
	// whose release is the key's newest it remembers (wire code RELEASED).
	// Nothing was done: that value holds no lock on the key; take the lock
	// with a new value.
	ErrValueReleased = errors.New("client: this value released the key")
)

// Errors with redsync's names, returned by Mutex together with the errors
// above (errors.Is matches both): a Lock that fails because the lock is held
// returns an error that is both ErrFailed and ErrLocked.
var (
	// ErrFailed means Mutex.Lock or Mutex.TryLock did not get the lock.
	ErrFailed = errors.New("client: failed to acquire lock")
	// ErrExtendFailed means Mutex.Extend did not extend the lock.
	ErrExtendFailed = errors.New("client: failed to extend lock")
	// ErrLockAlreadyExpired means Mutex.Unlock found the lock no longer held
	// by this mutex's value.
	ErrLockAlreadyExpired = errors.New("client: failed to unlock, lock was already expired")
)

// failure is what the client makes of an error from one attempt at one node.
type failure struct {
	err error
	// transient errors are retried on another node: the node is down or
	// unreachable, the cluster has no leader, the outcome is unknown.
	transient bool
	// leader is the leader's client address when the node named it.
	leader string
	// arg is the argument an invalid-argument reply named (wire
	// FormatInvalidArgument): "wait", "ttl", ...
	arg string
}

// classify sorts an error from go-redis by the code of the error reply
// (package wire, docs/protocol.md); anything that is not an error reply is
// a network failure, and transient unless TLS refused it.
func classify(err error) failure {
	var re redis.Error
	if !errors.As(err, &re) {
		if tlsRefused(err) {
			return failure{err: fmt.Errorf("%w: %w", ErrTLS, err)}
		}
		return failure{err: err, transient: true}
	}
	e := wire.Parse(re.Error())
	switch e.Code {
	case wire.Uncertain, wire.NoLeader, wire.Shutdown, wire.Timeout:
		return failure{err: err, transient: true}
	case wire.NotLeader:
		_, addr, _ := wire.ParseNotLeader(e)
		return failure{err: err, transient: true, leader: addr}
	case wire.WrongPass, wire.NoAuth:
		return failure{err: fmt.Errorf("%w: %s", ErrAuth, e)}
	case wire.NoPerm:
		return failure{err: fmt.Errorf("%w: %s", ErrNoPerm, e)}
	case wire.WrongType:
		return failure{err: fmt.Errorf("%w: %s", ErrWrongType, e)}
	case wire.NoSession:
		return failure{err: fmt.Errorf("%w: %s", ErrSessionEnded, e.Text)}
	case wire.LeaseLost:
		return failure{err: fmt.Errorf("%w: %s", ErrLeaseLost, e.Text)}
	case wire.Released:
		return failure{err: fmt.Errorf("%w: %s", ErrValueReleased, e.Text)}
	case wire.Err:
		arg, _, _ := wire.ParseInvalidArgument(e)
		return failure{err: fmt.Errorf("%w: %s", ErrInvalidArgument, e.Text), arg: arg}
	}
	return failure{err: fmt.Errorf("client: unexpected reply: %s", e)}
}

// tlsRefused reports whether err is a TLS failure that a retry would meet
// again: a certificate that did not verify (the node's, here), an alert
// from the node (it refused this client's certificate, or its absence), or
// a reply that is not TLS at all (the node serves plain TCP). A connection
// that drops during the handshake is not one of them.
func tlsRefused(err error) bool {
	var (
		verify *tls.CertificateVerificationError
		header tls.RecordHeaderError
		alert  tls.AlertError
		unkCA  x509.UnknownAuthorityError
		host   x509.HostnameError
		inval  x509.CertificateInvalidError
		op     *net.OpError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &header), errors.As(err, &alert),
		errors.As(err, &unkCA), errors.As(err, &host), errors.As(err, &inval):
		return true
	case errors.As(err, &op):
		// crypto/tls reports an alert the peer sent this way.
		return op.Op == "remote error"
	}
	return false
}
