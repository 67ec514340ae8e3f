package client

import "context"

// Semaphore is a counting lock: up to Permits holders at once, each with a
// permit that is a Lease of its own. A permit takes the lowest free slot,
// 0 to permits − 1 (Lease.Slot), and its token is larger than every earlier
// token, so the tokens of each slot increase: a store fences a permit
// holder per (resource, slot) with the plain validator (fence.SlotResource).
// Waits are first come, first served; a permit whose lease ends is handed
// to the first waiter.
//
// The number of permits is the semaphore's while anyone holds it: an
// acquire that gives another number is refused with ErrInvalidArgument.
// The semaphore is a key of its own kind on the server (ErrWrongType for a
// plain lock or read-write lock of the same name). A Semaphore holds no
// state; each permit's lease has a fresh owner (unless WithOwner), and
// Release, Extend, WithAutoRenew and WithSession work as for Acquire's.
type Semaphore struct {
	c       *Client
	name    string
	permits int
	opts    []LeaseOption
}

// NewSemaphore returns the semaphore name with permits permits (the server
// allows 1 to 1024); opts apply to each permit's lease. It acquires
// nothing.
func (c *Client) NewSemaphore(name string, permits int, opts ...LeaseOption) *Semaphore {
	return &Semaphore{c: c, name: name, permits: permits, opts: opts}
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns the number of permits.
func (s *Semaphore) Permits() int { return s.permits }

// Acquire waits for a permit, as Client.Acquire waits for a lock, and
// returns its lease.
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	return s.c.acquireLease(ctx, lockReq{kind: permit, name: s.name, permits: s.permits}, true, s.opts)
}

// TryAcquire is Acquire without waiting: if every permit is held, or
// anyone waits for one, it returns an error wrapping ErrLocked at once.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	return s.c.acquireLease(ctx, lockReq{kind: permit, name: s.name, permits: s.permits}, false, s.opts)
}
