package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// await makes a Raft call and waits for its future, both within ctx: some
// calls (VerifyLeader) block until Raft's leader loop takes them. Raft's own
// error is translated; if ctx ends first, the error is timedOut's, as what
// an unanswered call means is the caller's to say (uncertain, noLeader,
// contextErr).
func (n *Node) await(ctx context.Context, call func() raft.Future, timedOut func(ctxErr error) error) error {
	ch := make(chan error, 1)
	go func() { ch <- call().Error() }()
	select {
	case err := <-ch:
		if err != nil {
			return n.translate(err)
		}
		return nil
	case <-ctx.Done():
		return timedOut(ctx.Err())
	}
}

// uncertain is the timeout of a change that may have been committed (a
// configuration change, a transfer, a snapshot, a barrier): the outcome is
// unknown.
func uncertain(ctxErr error) error { return fmt.Errorf("%w: %v", ErrUnknownOutcome, ctxErr) }

// noLeader is the timeout of a read that needed a quorum (VerifyLeader): a
// definite failure, nothing was changed.
func noLeader(ctxErr error) error { return fmt.Errorf("%w: %v", ErrNoLeader, ctxErr) }

// contextErr is the timeout of a local read: the context's own error.
func contextErr(ctxErr error) error { return ctxErr }

// translate maps Raft's errors to this package's.
func (n *Node) translate(err error) error {
	switch {
	case errors.Is(err, errNotSent):
		return ErrShutdown // never reached Raft: nothing was done
	case errors.Is(err, raft.ErrNotLeader):
		lid, addr := n.Leader()
		return &NotLeaderError{Leader: lid, LeaderAddr: addr}
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrNoLeader
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: leadership lost while the command was in flight", ErrUnknownOutcome)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrShutdown)
	}
	return fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
}
