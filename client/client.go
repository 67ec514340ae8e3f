package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client talks to a fencer cluster through any subset of its nodes' client
// addresses. Every node accepts every command (followers forward to the
// leader), so one address is enough while that node is up; give several to
// survive its loss. A Client is safe for concurrent use; create one and
// share it.
type Client struct {
	cfg    config
	nodes  []*node
	ctx    context.Context // cancelled (cause ErrClosed) by Close
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // background work: renewals, clean-up releases

	mu    sync.Mutex
	cur   int  // index of the node requests go to
	probe bool // ask the current node who leads before the next request
}

// node is one address and its connection pool.
type node struct {
	addr string
	opts redis.Options
	rdb  *redis.Client
}

// Option configures a Client.
type Option func(*config)

type config struct {
	dialer          dialFunc
	user, password  string
	tls             *tls.Config
	requestTimeout  time.Duration
	failoverTimeout time.Duration
	drift           float64
}

// WithRequestTimeout bounds one attempt at one node; when it passes, the
// client tries the next node (acquire, extend and release are safe to
// repeat). A waiting acquire gets its wait on top. Renewals use at most half
// of the lease's remaining validity, so that a slow node leaves time to try
// another. The default is 5s.
func WithRequestTimeout(d time.Duration) Option {
	return func(c *config) { c.requestTimeout = d }
}

// WithFailoverTimeout bounds how long a request keeps trying the nodes while
// none of them can serve it (all down, or no leader) before it fails with
// ErrNoLeader. It should exceed an election (a few seconds). Renewals are
// bounded by the lease's validity instead. The default is 15s.
func WithFailoverTimeout(d time.Duration) Option {
	return func(c *config) { c.failoverTimeout = d }
}

// WithDrift sets the clock drift allowance as a fraction of a lease's TTL:
// the client counts a lease valid until TTL × (1 − factor) − 2ms after it
// sent the request that granted or extended it, so that its view ends before
// the server's. Mutexes can override it with WithDriftFactor. The default is
// 0.01, as in redsync.
func WithDrift(factor float64) Option {
	return func(c *config) { c.drift = factor }
}

// WithDialer sets the function that opens connections to the nodes, for
// proxies or tests; with WithTLS, the TLS handshake runs over the
// connections it opens. The default is a net.Dialer with the request
// timeout.
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(c *config) { c.dialer = dial }
}

// dialFunc opens a connection to a node.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// WithAuth makes the client authenticate every connection it opens, to
// every node, right after connecting and before any other command (HELLO 2
// AUTH user password, then AUTH if that fails), as fencerd requires with
// --requirepass or --users. An empty user is Redis's user "default", the
// one --requirepass sets the password of. Credentials the server refuses
// fail the request with ErrAuth at once, without trying the other nodes;
// a lock outside the user's pattern fails with ErrNoPerm. The default is
// no authentication.
func WithAuth(user, password string) Option {
	return func(c *config) { c.user, c.password = user, password }
}

// WithTLS makes the client dial every node over TLS with cfg, as fencerd
// serves it with --tls-cert-file. Set cfg.RootCAs to trust a private CA (the
// default is the system's roots), and cfg.Certificates to present a client
// certificate to a server that requires one (--tls-auth-clients). When
// cfg.ServerName is empty, each node's certificate is checked against the
// host of its address. A certificate that fails to verify, on either side,
// fails the request with ErrTLS at once. cfg is copied; nil means plain TCP.
// The default is plain TCP.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) { c.tls = cfg.Clone() }
}

// Defaults.
const (
	defaultRequestTimeout  = 5 * time.Second
	defaultFailoverTimeout = 15 * time.Second
	defaultDrift           = 0.01
	// driftFloor is added to every drift allowance, as redsync does.
	driftFloor = 2 * time.Millisecond
	// Backoff between rounds of attempts over all nodes.
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
	// leaderProbeTimeout bounds asking a node who leads.
	leaderProbeTimeout = time.Second
)

// New returns a Client for the cluster reachable at addrs (host:port client
// addresses, as given to fencerd --listen or --advertise). It does not
// connect until the first request.
func New(addrs []string, opts ...Option) (*Client, error) {
	cfg := config{
		requestTimeout:  defaultRequestTimeout,
		failoverTimeout: defaultFailoverTimeout,
		drift:           defaultDrift,
	}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case len(addrs) == 0:
		return nil, fmt.Errorf("%w: no addresses", ErrInvalidArgument)
	case cfg.requestTimeout <= 0:
		return nil, fmt.Errorf("%w: request timeout %v is not positive", ErrInvalidArgument, cfg.requestTimeout)
	case cfg.failoverTimeout <= 0:
		return nil, fmt.Errorf("%w: failover timeout %v is not positive", ErrInvalidArgument, cfg.failoverTimeout)
	case cfg.drift < 0 || cfg.drift >= 0.5:
		return nil, fmt.Errorf("%w: drift factor %v is outside [0, 0.5)", ErrInvalidArgument, cfg.drift)
	case cfg.user != "" && cfg.password == "":
		return nil, fmt.Errorf("%w: user %q has an empty password", ErrInvalidArgument, cfg.user)
	}
	c := &Client{cfg: cfg, probe: len(addrs) > 1}
	seen := make(map[string]bool)
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("%w: address %q: %v", ErrInvalidArgument, a, err)
		}
		if seen[a] {
			continue
		}
		seen[a] = true
		dial := cfg.dialer
		if cfg.tls != nil {
			dial = tlsDialer(dial, cfg.tls, a, cfg.requestTimeout)
		}
		n := &node{addr: a, opts: redis.Options{
			Addr: a,
			// RESP2 and no CLIENT SETINFO on connect: fencerd answers
			// HELLO 3 and SETINFO, but the client needs nothing that
			// RESP3 or a library name would add.
			Protocol:        2,
			DisableIdentity: true,
			// The client retries itself, on another node.
			MaxRetries:    -1,
			DialerRetries: 1,
			DialTimeout:   cfg.requestTimeout,
			// Every request carries a deadline in its context.
			ReadTimeout:           -1,
			WriteTimeout:          -1,
			ContextTimeoutEnabled: true,
			Dialer:                dial,
			// go-redis authenticates each new connection before its first
			// command (HELLO 2 AUTH user password).
			Username: cfg.user,
			Password: cfg.password,
		}}
		n.rdb = redis.NewClient(&n.opts)
		c.nodes = append(c.nodes, n)
	}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	return c, nil
}

// tlsDialer returns a dialer that opens a connection to addr with dial (a
// net.Dialer if nil) and completes a TLS handshake over it with cfg, which
// checks the node's certificate against addr's host unless cfg names a
// server. Doing the handshake here, not in go-redis, keeps it the same
// with and without WithDialer.
func tlsDialer(dial dialFunc, cfg *tls.Config, addr string, timeout time.Duration) dialFunc {
	if dial == nil {
		d := &net.Dialer{Timeout: timeout, KeepAlive: 5 * time.Minute}
		dial = d.DialContext
	}
	if cfg.ServerName == "" {
		host, _, _ := net.SplitHostPort(addr)
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	return func(ctx context.Context, network, a string) (net.Conn, error) {
		conn, err := dial(ctx, network, a)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

// Close ends every lease of the client (their contexts are cancelled with
// cause ErrClosed; the server frees them when their TTL passes) and closes
// its connections. Release leases first to free them at once.
func (c *Client) Close() error {
	c.cancel(ErrClosed)
	c.wg.Wait()
	var errs []error
	for _, n := range c.nodes {
		if err := n.rdb.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Addrs returns the addresses the client was given, without duplicates.
func (c *Client) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr
	}
	return out
}

// pick returns the node to send the next request to. After a failure (and
// at first use) it asks that node who leads, and moves to the leader if the
// leader is one of the client's addresses, saving the forwarding hop. The
// error is set only when the node refused the client's credentials or TLS
// (ErrAuth, ErrTLS): the request would meet the same refusal.
func (c *Client) pick(ctx context.Context) (*node, error) {
	c.mu.Lock()
	n, probe := c.nodes[c.cur], c.probe
	c.probe = false
	c.mu.Unlock()
	if !probe {
		return n, nil
	}
	pctx, cancel := context.WithTimeout(ctx, min(leaderProbeTimeout, c.cfg.requestTimeout))
	defer cancel()
	v, err := n.rdb.Do(pctx, "FENCE.LEADER").Slice()
	if err != nil {
		if f := classify(err); !f.transient && errIs(f.err, ErrAuth, ErrTLS) {
			return n, refusedBy(n, f.err)
		}
		return n, nil
	}
	if len(v) != 2 {
		return n, nil
	}
	addr, _ := v[1].(string)
	if l := c.nodeAt(addr); l != nil {
		c.mu.Lock()
		if c.nodes[c.cur] == n {
			c.cur = c.index(l)
		}
		n = c.nodes[c.cur]
		c.mu.Unlock()
	}
	return n, nil
}

// failed moves requests off n after a transient failure: to the leader the
// node named, if the client knows that address, else to the next address.
func (c *Client) failed(n *node, leader string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[c.cur] != n {
		return // someone else moved already
	}
	if l := c.nodeAt(leader); l != nil && l != n {
		c.cur = c.index(l)
		return
	}
	c.cur = (c.cur + 1) % len(c.nodes)
	c.probe = len(c.nodes) > 1
}

func (c *Client) nodeAt(addr string) *node {
	if addr == "" {
		return nil
	}
	for _, n := range c.nodes {
		if n.addr == addr {
			return n
		}
	}
	return nil
}

func (c *Client) index(n *node) int {
	for i, x := range c.nodes {
		if x == n {
			return i
		}
	}
	return 0
}

// retry says how exchange retries.
type retry struct {
	// attempt returns the timeout of the next attempt; zero or less means
	// stop trying.
	attempt func() time.Duration
	// failover bounds the time spent on transient failures; zero means
	// only ctx and attempt bound it.
	failover time.Duration
}

// standard is the retry policy of one-off requests.
func (c *Client) standard() retry {
	return retry{
		attempt:  func() time.Duration { return c.cfg.requestTimeout },
		failover: c.cfg.failoverTimeout,
	}
}

// exchange sends args to the current node and returns the reply (nil for a
// null reply) and the time just before the attempt that produced it was
// sent. Transient failures are retried on the next node, and after a round
// over all nodes with a growing pause, until ctx ends or the policy says
// stop. Only commands that are safe to repeat may go through it.
func (c *Client) exchange(ctx context.Context, p retry, args ...any) (reply any, sent time.Time, err error) {
	start := time.Now()
	backoff := minBackoff
	var last error
	for tries := 1; ; tries++ {
		if err := c.ctx.Err(); err != nil {
			return nil, sent, context.Cause(c.ctx)
		}
		if err := ctx.Err(); err != nil {
			return nil, sent, stopped(ctx, last)
		}
		timeout := p.attempt()
		if timeout <= 0 {
			return nil, sent, unavailable(last)
		}
		n, err := c.pick(ctx)
		if err != nil {
			return nil, sent, err
		}
		sent = time.Now()
		v, err := c.attempt(ctx, n, timeout, args...)
		switch {
		case err == nil:
			return v, sent, nil
		case errors.Is(err, redis.Nil):
			return nil, sent, nil
		case ctx.Err() != nil:
			return nil, sent, stopped(ctx, err)
		}
		f := classify(err)
		if !f.transient {
			return nil, sent, refusedBy(n, f.err)
		}
		last = fmt.Errorf("%s: %w", n.addr, err)
		c.failed(n, f.leader)
		if p.failover > 0 && time.Since(start) >= p.failover {
			return nil, sent, unavailable(last)
		}
		if tries%len(c.nodes) == 0 {
			pause := jitter(backoff)
			if p.failover > 0 {
				pause = min(pause, p.failover-time.Since(start))
			}
			if err := sleep(ctx, c.ctx, pause); err != nil {
				continue // reported at the top of the loop
			}
			backoff = min(2*backoff, maxBackoff)
			if p.failover > 0 && time.Since(start) >= p.failover {
				return nil, sent, unavailable(last)
			}
		}
	}
}

// attempt sends one command to n. It returns as soon as ctx ends, even if
// the node has not answered (the request then finishes in the background
// within timeout), so that a cancelled caller never waits for a dead node.
func (c *Client) attempt(ctx context.Context, n *node, timeout time.Duration, args ...any) (any, error) {
	actx, cancel := context.WithTimeout(ctx, timeout)
	type result struct {
		v   any
		err error
	}
	ch := make(chan result, 1)
	go func() {
		defer cancel()
		v, err := n.rdb.Do(actx, args...).Result()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.ctx.Done():
		return nil, context.Cause(c.ctx)
	}
}

// refusedBy names n in err if it is a refusal of the client's credentials
// or TLS, which says something about that node's configuration.
func refusedBy(n *node, err error) error {
	if errIs(err, ErrAuth, ErrTLS) {
		return fmt.Errorf("%w (node %s)", err, n.addr)
	}
	return err
}

// stopped is the error for a request whose context ended; it wraps the
// context's error and the last failure, if any.
func stopped(ctx context.Context, last error) error {
	if last == nil || errors.Is(last, ctx.Err()) {
		return ctx.Err()
	}
	return fmt.Errorf("%w (last error: %w)", ctx.Err(), last)
}

func unavailable(last error) error {
	if last == nil {
		return ErrNoLeader
	}
	return fmt.Errorf("%w (last error: %w)", ErrNoLeader, last)
}

// sleep waits for d, or until either context ends.
func sleep(ctx, cctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-cctx.Done():
		return context.Cause(cctx)
	}
}

// jitter spreads d over [d/2, d) so that clients do not retry in step.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// allowance is the drift allowance for a lease of ttl.
func allowance(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + driftFloor
}

// millis converts a duration for the wire: whole milliseconds, at least 1.
func millis(d time.Duration) int64 {
	return max(d.Milliseconds(), 1)
}
