package client

import (
	"context"
	"fmt"
)

// maxKeys is the server's bound on the keys of one AcquireAll.
const maxKeys = 64

// AcquireAll waits until it holds every lock of names at once and returns
// one lease for the set: granted all together or not at all, in one entry
// of the server's log, so every lock of the set has the same fencing token
// (Lease.Token). While it waits it holds none of them; it takes its place
// in every lock's queue at once and is granted when it is first in all of
// them, so two AcquireAll of the same locks in opposite orders never
// deadlock, and later waiters for any of the locks queue behind it.
//
// The locks are plain locks (Acquire's): a read-write lock or semaphore
// among them fails with ErrWrongType. names holds 1 to 64 names;
// duplicates count once. The lease is renewed and released for the whole
// set (Extend, WithAutoRenew, Release); it is lost when any of its locks
// is, and then the others are released. Errors are as for Acquire.
func (c *Client) AcquireAll(ctx context.Context, names []string, opts ...LeaseOption) (*Lease, error) {
	q, err := multiReq(names)
	if err != nil {
		return nil, err
	}
	return c.acquireLease(ctx, q, true, opts)
}

// TryAcquireAll is AcquireAll without waiting: if any of the locks is
// held, or waited for, it returns an error wrapping ErrLocked at once,
// holding none of them.
func (c *Client) TryAcquireAll(ctx context.Context, names []string, opts ...LeaseOption) (*Lease, error) {
	q, err := multiReq(names)
	if err != nil {
		return nil, err
	}
	return c.acquireLease(ctx, q, false, opts)
}

// multiReq is the request for names, without duplicates, in their order.
func multiReq(names []string) (lockReq, error) {
	seen := make(map[string]bool, len(names))
	var keys []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			keys = append(keys, n)
		}
	}
	if len(keys) == 0 || len(keys) > maxKeys {
		return lockReq{}, fmt.Errorf("%w: %d distinct lock names, not 1 to %d", ErrInvalidArgument, len(keys), maxKeys)
	}
	return lockReq{kind: multiLock, name: keys[0], names: keys}, nil
}
