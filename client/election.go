package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrNotElected means an Election call that needs leadership (Proclaim)
// was made by a campaigner that is not the leader, or that Leader found
// no leader.
var ErrNotElected = errors.New("client: not the leader")

// Election is a leader election: a lock named by the election's name, held
// under a session, whose holder is the leader and whose fencing token is
// the leader's epoch. Epochs strictly increase from one leader to the next,
// so a store that checks them with the validators in fence/ refuses a
// deposed leader's late writes.
//
// An Election is one campaigner's handle; it campaigns for one term at a
// time. It is safe for concurrent use.
type Election struct {
	c       *Client
	session *Session
	name    string

	mu    sync.Mutex
	lease *Lease // the current term, nil while not leading
	last  *Lease // the latest term, kept after it ends (Done, Context)
	value string
}

// Leader is an election's leader as the server records it.
type Leader struct {
	// Value is what the leader announced (Campaign, Proclaim).
	Value string
	// Epoch is the leader's epoch: its lock's fencing token.
	Epoch uint64
	// Owner is the campaigner's owner value on the server, and Session
	// the session it leads under.
	Owner   string
	Session uint64
}

// NewElection returns a handle on the election name for campaigns under
// session s. Leadership ends with the session: keep s alive (it is by
// default) for as long as this process may lead.
func (c *Client) NewElection(s *Session, name string) *Election {
	return &Election{c: c, session: s, name: name}
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// Campaign waits until this campaigner is elected and returns its epoch.
// Campaigners are elected in the order they arrived while the leader is
// stable (they queue on the server, without polling). value is announced
// as the leader's value, atomically with the election. Campaign fails
// with an error wrapping ctx.Err() if ctx ends first, or ErrSessionEnded
// if the session ends.
//
// Campaigning again while leading returns the current epoch.
func (e *Election) Campaign(ctx context.Context, value string) (uint64, error) {
	e.mu.Lock()
	if e.lease != nil && e.lease.Err() == nil {
		epoch := e.lease.Token()
		e.mu.Unlock()
		return epoch, nil
	}
	e.mu.Unlock()
	// A fresh owner per term: the server remembers a resigned owner's
	// release and would refuse it again.
	owner, err := randomOwner()
	if err != nil {
		return 0, err
	}
	l, err := e.c.Acquire(ctx, e.name, WithSession(e.session), WithOwner(owner), WithLockValue(value))
	if err != nil {
		return 0, fmt.Errorf("campaign in %q: %w", e.name, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lease, e.last, e.value = l, l, value
	return l.Token(), nil
}

// leading returns the current term's lease, or nil.
func (e *Election) leading() *Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lease == nil || e.lease.Err() != nil {
		return nil
	}
	return e.lease
}

// Epoch returns the epoch of the current term, or 0 if not leading.
func (e *Election) Epoch() uint64 {
	if l := e.leading(); l != nil {
		return l.Token()
	}
	return 0
}

// Done returns a channel closed when the latest term's leadership ends
// (the session ended or was lost, or Resign): already closed if that term
// has ended, or if this campaigner was never elected. Stop acting as the
// leader when it is closed; the epoch keeps a late write out of a store
// that checks it.
func (e *Election) Done() <-chan struct{} {
	return e.Context().Done()
}

// Context returns a context that ends with the latest term's leadership;
// it has ended already if that term has, or if this campaigner was never
// elected.
func (e *Election) Context() context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last != nil {
		return e.last.Context()
	}
	return notElected
}

// notElected is the context of a campaigner never elected: ended.
var notElected = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotElected)
	return ctx
}()

// Proclaim announces a new value as the leader's, keeping the epoch. It
// returns an error wrapping ErrNotElected if this campaigner does not
// lead.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	l := e.leading()
	if l == nil {
		return fmt.Errorf("proclaim in %q: %w", e.name, ErrNotElected)
	}
	v, _, err := e.c.exchange(ctx, e.c.standard(), "FENCE.PROCLAIM", e.name, l.Owner(), e.session.ID(), value)
	if err != nil {
		return fmt.Errorf("proclaim in %q: %w", e.name, err)
	}
	if n, _ := v.(int64); n != 1 {
		l.cancel(fmt.Errorf("%w: the server says this campaigner no longer leads %q", ErrLeaseLost, e.name))
		return fmt.Errorf("proclaim in %q: %w", e.name, ErrNotElected)
	}
	e.mu.Lock()
	e.value = value
	e.mu.Unlock()
	return nil
}

// Resign gives up leadership, if this campaigner leads: its Done channel
// closes first, then the next campaigner in line is elected in the same
// entry that frees the election. It is a no-op if not leading.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	l := e.lease
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	if err := l.Release(ctx); err != nil && !errors.Is(err, ErrLeaseLost) {
		return fmt.Errorf("resign from %q: %w", e.name, err)
	}
	e.mu.Lock()
	if e.lease == l {
		e.lease = nil
	}
	e.mu.Unlock()
	return nil
}

// Leader returns the election's current leader. It returns an error
// wrapping ErrNotElected if there is none.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	return e.c.leaderOf(ctx, e.name)
}

// leaderOf reads the holder of name (FENCE.HOLDER).
func (c *Client) leaderOf(ctx context.Context, name string) (Leader, error) {
	v, _, err := c.exchange(ctx, c.standard(), "FENCE.HOLDER", name)
	if err != nil {
		return Leader{}, fmt.Errorf("leader of %q: %w", name, err)
	}
	if v == nil {
		return Leader{}, fmt.Errorf("leader of %q: %w: no leader", name, ErrNotElected)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 5 {
		return Leader{}, fmt.Errorf("client: unexpected reply to FENCE.HOLDER: %v", v)
	}
	owner, _ := a[0].(string)
	tok, _ := a[1].(int64)
	sess, _ := a[3].(int64)
	value, _ := a[4].(string)
	if tok <= 0 {
		return Leader{}, fmt.Errorf("client: unexpected reply to FENCE.HOLDER: %v", v)
	}
	return Leader{Value: value, Epoch: uint64(tok), Owner: owner, Session: uint64(sess)}, nil
}

// Observe returns a channel that receives the election's leader now (if
// there is one) and then every change of leader or of its value, in order,
// pushed by the server (FENCE.WATCH), without polling. Epochs on it never
// go back. The channel is closed when ctx ends or the watch fails (no node
// reachable for the failover timeout); an error is returned only if the
// watch cannot start. Leader.Session is not set by Observe.
//
// A receiver that falls behind skips to the latest leader rather than
// seeing every intermediate one.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	w, err := e.c.Watch(ctx, e.name)
	if err != nil {
		return nil, fmt.Errorf("observe %q: %w", e.name, err)
	}
	out := make(chan Leader, 1)
	go func() {
		defer close(out)
		defer w.Close()
		var last Leader
		for ev := range w.Events() {
			var ld Leader
			switch ev.Kind {
			case EventGranted, EventProclaimed, EventReset:
				ld = Leader{Value: ev.Value, Epoch: ev.Token, Owner: ev.Owner}
			default:
				continue // released, expired, revoked: the next grant follows
			}
			if ld.Epoch == 0 || ld == last || ld.Epoch < last.Epoch {
				continue // free, unchanged, or older than what was sent
			}
			last = ld
			select {
			case out <- ld:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
