package client

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// SessionOption configures NewSession.
type SessionOption func(*sessionConfig)

type sessionConfig struct{ ttl time.Duration }

// defaultSessionTTL is a session's TTL unless WithSessionTTL sets it.
const defaultSessionTTL = 10 * time.Second

// WithSessionTTL sets the session's time to live: the server ends the
// session, and releases every lock held under it, when it has not been kept
// alive for that long. The server accepts 100ms to 24h by default. The
// default is 10s.
func WithSessionTTL(ttl time.Duration) SessionOption {
	return func(c *sessionConfig) { c.ttl = ttl }
}

// Session is a lease of its own on the server that locks can be held under
// (WithSession, WithMutexSession, Election): one keepalive, sent about every
// TTL/3 in the background, renews it for all of them, and when it ends
// (closed, expired, revoked) the server releases every lock held under it,
// in one entry. Its context ends when the session is lost (the server says
// it ended, or its validity ran out before a keepalive succeeded) or
// closed.
type Session struct {
	c  *Client
	id uint64
	validity
	renewd chan struct{} // closed when the keepalive goroutine ends

	mu sync.Mutex // guards taken and leases
	// taken is the count of locks taken from the session by others that
	// the last keepalive reported; leases are the session's locks held
	// through this Session, to end when one of them is taken.
	taken  uint64
	leases map[*Lease]struct{}

	closeMu sync.Mutex
	closed  bool
}

// NewSession opens a session on the server and keeps it alive in the
// background until Close or until it is lost.
//
// An open whose outcome is unknown (a leader change while it was in
// flight) is retried, which can leave behind an unused session; it holds
// no locks and ends after its TTL.
func (c *Client) NewSession(ctx context.Context, opts ...SessionOption) (*Session, error) {
	cfg := sessionConfig{ttl: defaultSessionTTL}
	for _, o := range opts {
		o(&cfg)
	}
	drift := allowance(cfg.ttl, c.cfg.drift)
	if cfg.ttl < time.Millisecond || cfg.ttl <= drift {
		return nil, fmt.Errorf("%w: session ttl %v is too short", ErrInvalidArgument, cfg.ttl)
	}
	v, sent, err := c.exchange(ctx, c.standard(), "FENCE.SESSION", "OPEN", millis(cfg.ttl))
	if err != nil {
		return nil, fmt.Errorf("open a session: %w", err)
	}
	id, ok := v.(int64)
	if !ok || id <= 0 {
		return nil, fmt.Errorf("client: unexpected reply to FENCE.SESSION OPEN: %v", v)
	}
	s := &Session{c: c, id: uint64(id), renewd: make(chan struct{}), leases: make(map[*Lease]struct{})}
	s.start(c.ctx, cfg.ttl, drift, sent, func(until time.Time) error {
		return fmt.Errorf("%w: session %d's validity ran out (at %s) before a keepalive succeeded", ErrLeaseLost, s.id, until.Format(time.RFC3339Nano))
	})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		s.renewLoop(s.KeepAlive, s.renewd)
	}()
	return s, nil
}

// ID returns the session's ID: the log position of the entry that opened
// it, never reused.
func (s *Session) ID() uint64 { return s.id }

// TTL returns the session's time to live.
func (s *Session) TTL() time.Duration { return s.ttl }

// Until returns the end of the session's validity as the client counts it:
// from just before it sent the request that opened or last renewed it, the
// TTL less a drift allowance. The server ends it no earlier than that.
func (s *Session) Until() time.Time { return s.validUntil() }

// Context returns a context cancelled when the session ends (lost, closed,
// or the client closed); context.Cause says why.
func (s *Session) Context() context.Context { return s.ctx }

// Done returns Context().Done().
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Err returns nil while the session is valid, then why it ended: an error
// wrapping ErrLeaseLost (ErrSessionEnded if the server said so), or
// ErrReleased after Close, or ErrClosed.
func (s *Session) Err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// KeepAlive renews the session for its TTL from now (the background
// keepalive does this on its own), retrying transient failures until ctx
// ends or the validity runs out. It returns an error wrapping
// ErrSessionEnded, and ends the session's context, if the server says the
// session is not open.
func (s *Session) KeepAlive(ctx context.Context) error {
	if err := s.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	defer stop()
	p := retry{attempt: func() time.Duration { return s.attemptTimeout(s.c) }}
	v, sent, err := s.c.exchange(ctx, p, "FENCE.SESSION", "KEEPALIVE", s.id)
	if err != nil {
		if cerr := s.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("keep session %d alive: %w", s.id, err)
	}
	n, _ := v.(int64)
	if n < 1 {
		s.cancel(fmt.Errorf("%w: session %d is not open on the server", ErrSessionEnded, s.id))
		return s.Err()
	}
	s.renewed(sent)
	s.mu.Lock()
	taken := uint64(n - 1)
	check := taken > s.taken
	s.taken = max(s.taken, taken)
	s.mu.Unlock()
	if check {
		return s.endTakenLeases(ctx)
	}
	return nil
}

// endTakenLeases ends the leases of locks that were taken from the session
// (revoked, overwritten): those that FENCE.SESSION INFO no longer lists
// with their token.
func (s *Session) endTakenLeases(ctx context.Context) error {
	v, _, err := s.c.exchange(ctx, s.c.standard(), "FENCE.SESSION", "INFO", s.id)
	if err != nil {
		return fmt.Errorf("list session %d's locks: %w", s.id, err)
	}
	if v == nil {
		s.cancel(fmt.Errorf("%w: session %d is not open on the server", ErrSessionEnded, s.id))
		return s.Err()
	}
	a, ok := v.([]any)
	if !ok || len(a) != 3 {
		return fmt.Errorf("client: unexpected reply to FENCE.SESSION INFO: %v", v)
	}
	locks, _ := a[2].([]any)
	held := make(map[string]uint64, len(locks))
	for _, l := range locks {
		if f, ok := l.([]any); ok && len(f) == 3 {
			name, _ := f[0].(string)
			tok, _ := f[2].(int64)
			held[name] = uint64(tok)
		}
	}
	s.mu.Lock()
	var lost, shared []*Lease
	for l := range s.leases {
		switch l.lockKind() {
		case readLock, writeLock, permit:
			// A shared key has holders of its own, listed by
			// FENCE.HOLDERS.
			shared = append(shared, l)
			continue
		}
		for _, name := range l.Names() {
			if held[name] != l.token {
				lost = append(lost, l)
				delete(s.leases, l)
				break
			}
		}
	}
	s.mu.Unlock()
	for _, l := range shared {
		ok, err := s.c.holds(ctx, l.name, l.owner, l.token)
		if err != nil {
			return err
		}
		if !ok {
			s.mu.Lock()
			delete(s.leases, l)
			s.mu.Unlock()
			lost = append(lost, l)
		}
	}
	for _, l := range lost {
		l.cancel(fmt.Errorf("%w: %s was taken from session %d (revoked or overwritten)", ErrLeaseLost, l.req().what(), s.id))
	}
	return nil
}

// holds reports whether owner holds name with token, as FENCE.HOLDERS
// lists its holders: [owner, token, remaining-ms, session, mode, slot].
func (c *Client) holds(ctx context.Context, name, owner string, token uint64) (bool, error) {
	v, _, err := c.exchange(ctx, c.standard(), "FENCE.HOLDERS", name)
	if err != nil {
		return false, fmt.Errorf("list the holders of %q: %w", name, err)
	}
	hs, ok := v.([]any)
	if !ok && v != nil {
		return false, fmt.Errorf("client: unexpected reply to FENCE.HOLDERS: %v", v)
	}
	for _, h := range hs {
		f, _ := h.([]any)
		if len(f) < 2 {
			return false, fmt.Errorf("client: unexpected reply to FENCE.HOLDERS: %v", v)
		}
		o, _ := f[0].(string)
		t, _ := f[1].(int64)
		if o == owner && uint64(t) == token {
			return true, nil
		}
	}
	return false, nil
}

// track adds l to the session's leases until it ends.
func (s *Session) track(l *Lease) {
	s.mu.Lock()
	s.leases[l] = struct{}{}
	s.mu.Unlock()
	context.AfterFunc(l.ctx, func() {
		s.mu.Lock()
		delete(s.leases, l)
		s.mu.Unlock()
	})
}

// Close ends the session: its context ends first (cause ErrReleased), so
// that work under its locks stops, then the server releases every lock
// held under it, as a Release of each would, handing each to its first
// waiter. It retries transient failures until ctx ends. It returns an
// error wrapping ErrSessionEnded if the server says the session was no
// longer open (it expired, or an earlier attempt of this Close closed it
// and its reply was lost). Calling it again after it succeeded returns nil.
func (s *Session) Close(ctx context.Context) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.cancel(ErrReleased)
	s.stopTimer()
	<-s.renewd
	v, _, err := s.c.exchange(ctx, s.c.standard(), "FENCE.SESSION", "CLOSE", s.id)
	if err != nil {
		return fmt.Errorf("close session %d: %w", s.id, err)
	}
	s.closed = true
	if n, _ := v.(int64); n != 1 {
		return fmt.Errorf("%w: session %d was not open when closed", ErrSessionEnded, s.id)
	}
	return nil
}

// acquireInSession takes q's lock under s and returns its lease, whose
// context ends with the session's.
func (c *Client) acquireInSession(ctx context.Context, s *Session, q lockReq, wait bool) (*Lease, error) {
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("acquire %s: %w", q.what(), err)
	}
	g, err := c.acquireReq(ctx, q, 0, wait)
	if err != nil {
		return nil, err
	}
	if err := s.Err(); err != nil {
		// Granted, but the session ended on this side meanwhile: the
		// lock is worth nothing to the caller; let it go.
		c.releaseLater(q)
		g.rounds.abandon()
		return nil, fmt.Errorf("acquire %s: %w", q.what(), err)
	}
	l := newLease(c, q, g)
	l.session, l.value = s, q.value
	close(l.renewd)
	l.ttl = s.ttl
	l.ctx, l.cancel = context.WithCancelCause(s.ctx)
	g.rounds.follow(l.ctx)
	s.track(l)
	return l, nil
}
