package redisbridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencerlock/fencer/rediscompat"
	"github.com/fencerlock/fencer/server"
	"github.com/fencerlock/fencer/wire"
	"github.com/tidwall/redcon"
)

// Locker is what the bridge needs of a fencer node (*server.Node).
type Locker interface {
	Acquire(ctx context.Context, key, owner string, ttl, wait time.Duration) (server.Grant, bool, error)
	AcquireRedis(ctx context.Context, key, value string, ttl time.Duration) (server.Grant, bool, error)
	Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error)
	Release(ctx context.Context, key, owner string) (bool, error)
	Revoke(ctx context.Context, key string) (bool, error)
	// Update commits a command of several steps as one entry (see
	// server.Node.Update).
	Update(ctx context.Context, keys []string, fn func(tx *server.Tx) error) error
	Status(ctx context.Context, key string) (server.Status, bool, error)
	Check(ctx context.Context, key string, token uint64) (bool, error)
	ID() string
	Leader() (id, clientAddr string)
	Members(ctx context.Context) ([]server.Member, error)
	Join(ctx context.Context, id, raftAddr, clientAddr string) error
	Remove(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, id string) error
}

// Config configures a Bridge.
type Config struct {
	// RequestTimeout bounds every request; a waiting acquire gets its wait
	// on top. A write still in flight when it passes is answered with
	// -UNCERTAIN. The default is 10s.
	RequestTimeout time.Duration
	// Logger receives the bridge's logs; nil means slog.Default().
	Logger *slog.Logger
	// DefaultLockTTL is the lease given to a lock taken by SETNX, or by SET
	// NX without PX or EX: Redis would keep such a key forever, fencer never
	// grants an endless lease. Zero means the default, 30s.
	DefaultLockTTL time.Duration
	// RedlockMultiEndpoint makes the Redis-compatible acquire, extend and
	// release idempotent per value, as the native commands are, so that a
	// Redlock client given every node of one cluster as if they were
	// independent masters reaches its quorum: a same-value SET NX on a key
	// that value holds returns the same grant, a compare-then-delete by a
	// value is that value's remembered release (repeated, it succeeds), and
	// a same-value write after that value's release is refused. It is safe
	// only if every lock attempt uses a unique value, as the Redlock
	// algorithm requires. The default is false: Redis's own semantics (a
	// second SET NX is refused, even with the same value).
	RedlockMultiEndpoint bool
	// ScriptTimeLimit bounds a Lua script's run time; a script stopped by it
	// has no effect. The default is 5s.
	ScriptTimeLimit time.Duration

	// Limits (see limits.go). Each is answered with an error that leaves
	// the connection open, except MaxClients, which refuses the connection.
	//
	// Zero means the default for each.
	//
	// MaxArgs bounds the arguments of one command, its name included. The
	// default is 1024.
	MaxArgs int
	// MaxBulkLen bounds one argument in bytes. The default is 1 MiB.
	MaxBulkLen int
	// MaxClients bounds the open client connections (forwarding nodes'
	// included). The default is 10000, as Redis's maxclients.
	MaxClients int
	// MaxPipeline bounds the commands one connection may send in one read
	// batch; the rest of the batch is answered with an error. The default
	// is 1000.
	MaxPipeline int
	// IdleTimeout closes a connection that sends nothing for that long; a
	// subscribed connection is exempt. Zero, the default, never closes one
	// (Redis's default timeout 0: pooled clients keep idle connections).
	IdleTimeout time.Duration

	// Users turns authentication on (see auth.go): connections must AUTH
	// as one of them. RequirePass adds the user "default" with that
	// password and pattern "*", as Redis's requirepass. Both empty, the
	// default, means no authentication.
	Users       []User
	RequirePass string
	// ForwardUser is the user this node authenticates as when it forwards
	// a command to the leader: a user of Users with a plain-text password
	// and pattern "*", configured alike on every node. With only
	// RequirePass it may be left empty and is "default".
	ForwardUser string

	// TLS, if set, serves RESP over TLS (as Redis 6+ does); set ClientAuth
	// and ClientCAs in it to require client certificates. ForwardTLS, if
	// set, is used to dial the leader when forwarding (with this node's
	// certificate, where the leader requires one). Both nil, the default,
	// means plain TCP.
	TLS, ForwardTLS *tls.Config
}

// DefaultConfig returns the bridge's defaults.
func DefaultConfig() Config {
	return Config{RequestTimeout: 10 * time.Second, DefaultLockTTL: 30 * time.Second, ScriptTimeLimit: 5 * time.Second,
		MaxArgs: 1024, MaxBulkLen: 1 << 20, MaxClients: 10000, MaxPipeline: 1000}
}

// Validate reports an invalid field.
func (c *Config) Validate() error {
	if c.RequestTimeout <= 0 {
		return fmt.Errorf("redisbridge: config RequestTimeout: must be positive, got %v", c.RequestTimeout)
	}
	if c.DefaultLockTTL < 0 {
		return fmt.Errorf("redisbridge: config DefaultLockTTL: must not be negative, got %v", c.DefaultLockTTL)
	}
	if c.ScriptTimeLimit < 0 {
		return fmt.Errorf("redisbridge: config ScriptTimeLimit: must not be negative, got %v", c.ScriptTimeLimit)
	}
	if err := c.validateLimits(); err != nil {
		return err
	}
	_, _, err := c.userTable()
	return err
}

// handler serves one command.
type handler func(b *Bridge, r *request)

// request is one command on one connection.
type request struct {
	c    redcon.Conn
	args [][]byte // args[0] is the command name
	raw  []byte   // the command as the client sent it, for forwarding
	conn *connState
	// redispatched counts how often the command was run again because the
	// leader it was to be forwarded to could not be reached.
	redispatched int
}

// connState is what the bridge keeps per connection.
type connState struct {
	// forwarded marks a connection opened by another node to forward
	// commands here: a NOTLEADER is answered, never forwarded again, so two
	// nodes with different views of the leader cannot bounce a command.
	forwarded bool
	// id is the connection's CLIENT ID.
	id int64
	// proto is the RESP version replies are written in: 2 until HELLO 3.
	proto int
	// name, libName and libVer are set by CLIENT SETNAME and SETINFO.
	name, libName, libVer string
	// sub is set once the connection subscribed to a channel; its writes
	// then go through sub, under its lock.
	sub *subscriber
	// detached marks a connection taken out of redcon's loop (sub is set).
	detached bool
	// user is the authenticated user; nil before AUTH (or always, when
	// authentication is off).
	user *User
	// batchLeft is how many commands of the current read batch follow the
	// one being handled; batchPos is its position in the batch.
	batchLeft, batchPos int
}

// Bridge serves RESP on one listener.
type Bridge struct {
	cfg     Config
	locker  Locker
	log     *slog.Logger
	cmds    map[string]handler
	users   map[string]*User
	fwd     *forwarder
	srv     *redcon.Server
	ln      net.Listener
	hub     *hub
	engine  *rediscompat.Engine // the Redis commands and scripts
	hangups hangups             // connections of waiting requests
	start   time.Time
	nextID  atomic.Int64
	open    atomic.Int64 // client connections, for INFO

	ctx    context.Context // cancelled by Close: ends every waiting request
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	active atomic.Int64 // handlers running
}

// New returns a bridge serving locker; call Serve to start it.
func New(locker Locker, cfg Config) (*Bridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.DefaultLockTTL == 0 {
		cfg.DefaultLockTTL = DefaultConfig().DefaultLockTTL
	}
	cfg.withDefaultLimits()
	users, fwdAuth, err := cfg.userTable()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Bridge{cfg: cfg, locker: locker, log: logger, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		users: users, fwd: newForwarder(fwdAuth, cfg.ForwardTLS), hub: newHub(), start: time.Now()}
	b.engine = rediscompat.New(locker, rediscompat.Config{
		RedlockMultiEndpoint: cfg.RedlockMultiEndpoint,
		DefaultLockTTL:       cfg.DefaultLockTTL,
		ScriptTimeLimit:      cfg.ScriptTimeLimit,
		Logger:               logger,
		Publish: func(shard bool, channel string, msg []byte) int {
			n := b.publishLocal(shard, channel, msg)
			b.relayPublish(shard, []byte(channel), msg)
			return n
		},
	})
	b.cmds = map[string]handler{
		"ping":          (*Bridge).ping,
		"quit":          (*Bridge).quit,
		"echo":          (*Bridge).echo,
		"hello":         (*Bridge).hello,
		"auth":          (*Bridge).auth,
		"select":        (*Bridge).selectDB,
		"client":        (*Bridge).client,
		"info":          (*Bridge).info,
		"command":       (*Bridge).command,
		"reset":         (*Bridge).reset,
		"subscribe":     (*Bridge).subscribe,
		"ssubscribe":    (*Bridge).subscribe,
		"unsubscribe":   (*Bridge).unsubscribe,
		"sunsubscribe":  (*Bridge).unsubscribe,
		"publish":       (*Bridge).publish,
		"spublish":      (*Bridge).publish,
		"fence.acquire": (*Bridge).acquire,
		"fence.extend":  (*Bridge).extend,
		"fence.release": (*Bridge).release,
		"fence.revoke":  (*Bridge).revoke,
		"fence.status":  (*Bridge).status,
		"fence.token":   (*Bridge).token,
		"fence.check":   (*Bridge).check,
		"fence.leader":  (*Bridge).leader,

		"fence.members":   (*Bridge).members,
		"fence.join":      (*Bridge).join,
		"fence.remove":    (*Bridge).remove,
		"fence.transfer":  (*Bridge).transfer,
		"fence.forwarded": (*Bridge).forwarded,
		"fence.statehash": (*Bridge).statehash,
		"fence.snapshot":  (*Bridge).snapshot,
	}
	// Every other Redis command the Redis-compatible layer has.
	for _, name := range rediscompat.Names() {
		if _, own := b.cmds[name]; !own {
			b.cmds[name] = (*Bridge).compat
		}
	}
	return b, nil
}

// Serve accepts connections on ln until Close. It returns nil after Close.
func (b *Bridge) Serve(ln net.Listener) error {
	if b.cfg.TLS != nil {
		ln = tls.NewListener(ln, b.cfg.TLS)
	}
	ln = guardListener{Listener: ln, cfg: &b.cfg}
	b.ln = ln
	accept := func(c redcon.Conn) bool {
		if b.open.Load() >= int64(b.cfg.MaxClients) {
			b.refuseClient(c)
			return false
		}
		c.SetContext(b.newConnState())
		b.open.Add(1)
		return true
	}
	closed := func(c redcon.Conn, _ error) {
		if st, _ := c.Context().(*connState); st == nil || !st.detached {
			b.open.Add(-1)
		}
	}
	b.srv = redcon.NewServerNetwork(ln.Addr().Network(), ln.Addr().String(), b.handle, accept, closed)
	b.srv.AcceptError = func(err error) { b.log.Warn("accept failed", "err", err) }
	b.srv.SetIdleClose(b.cfg.IdleTimeout)
	defer close(b.done)
	return b.srv.Serve(ln)
}

// Close stops accepting, ends waiting requests and closes every connection.
func (b *Bridge) Close() error {
	var err error
	b.once.Do(func() {
		b.cancel()
		if b.srv != nil {
			// Let handlers answer (a waiting acquire gets its error) and
			// redcon flush, before the connections are closed.
			for end := time.Now().Add(2 * time.Second); b.active.Load() > 0 && time.Now().Before(end); {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			err = b.srv.Close()
			<-b.done
		}
		b.hub.closeAll()
		b.fwd.close()
	})
	return err
}

func (b *Bridge) newConnState() *connState {
	return &connState{id: b.nextID.Add(1), proto: 2}
}

func (b *Bridge) handle(c redcon.Conn, cmd redcon.Command) {
	b.active.Add(1)
	defer b.active.Add(-1)
	st, _ := c.Context().(*connState)
	if st == nil {
		st = b.newConnState()
		c.SetContext(st)
	}
	if e := b.overLimit(c, st, cmd.Args); e.Code != "" {
		writeError(c, e)
		return
	}
	name := strings.ToLower(string(cmd.Args[0]))
	if e := b.permission(st, name, cmd.Args); e.Code != "" {
		writeError(c, e)
		return
	}
	h, ok := b.cmds[name]
	if !ok {
		writeError(c, unknownCommand(cmd.Args))
		return
	}
	if st.proto == 2 && st.sub != nil && st.sub.count() > 0 && !allowedWhileSubscribed[name] {
		// RESP2 cannot tell a reply from a message: Redis allows only these
		// while subscribed.
		writeError(c, errf("Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", commandName(cmd.Args)))
		return
	}
	h(b, &request{c: c, args: cmd.Args, raw: cmd.Raw, conn: st})
}

// commandName is the name Redis reports for a command: "get", or
// "client|info" for a subcommand.
func commandName(args [][]byte) string {
	name := strings.ToLower(string(args[0]))
	if len(args) > 1 && hasSubcommands[name] {
		return name + "|" + strings.ToLower(string(args[1]))
	}
	return name
}

// unknownCommand is Redis's wording for a command it does not have.
func unknownCommand(args [][]byte) wire.Error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "unknown command '%s', with args beginning with: ", truncate(args[0], 128))
	for i, a := range args[1:] {
		if i == 8 {
			break
		}
		fmt.Fprintf(&sb, "'%s' ", truncate(a, 128))
	}
	return errf("%s", sb.String())
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, string(b))
}

// wrongArity is Redis's wording for a bad argument count.
func wrongArity(r *request) {
	writeError(r.c, errf("wrong number of arguments for '%s' command", strings.ToLower(string(r.args[0]))))
}

// fail answers err. A command that reached a follower is forwarded to the
// leader, once, and the leader's reply relayed as it is.
//
// Forwarding, or running the command again, never repeats an effect: every
// command takes effect in at most one entry (a command of several steps is
// one transaction, Locker.Update), and the server answers NotLeaderError
// only when that entry was never appended. Once an entry may have been,
// the error is ErrUnknownOutcome (UNCERTAIN), which is never forwarded
// (docs/design.md, invariant 6).
//
// If the leader cannot be reached at all (the command provably went
// nowhere), the node waits for the leader to change, within the request's
// deadline, and runs the command again from the start: that is how a
// command sent to a follower during a failover lands on the new leader.
func (b *Bridge) fail(ctx context.Context, r *request, err error) {
	var nl *server.NotLeaderError
	if !errors.As(err, &nl) || r.conn.forwarded {
		writeErr(r.c, err)
		return
	}
	addr := nl.LeaderAddr
	if addr == "" {
		// Leadership just moved (the node stepped down as the command
		// reached it) and the new leader is not known yet: nothing was
		// done, so wait for it within the deadline and send it there.
		if !b.awaitLeaderChange(ctx, "") {
			writeErr(r.c, err)
			return
		}
		if id, next := b.locker.Leader(); id == b.locker.ID() {
			b.redispatch(ctx, r)
			return
		} else {
			addr = next
		}
	}
	for tries := 0; ; tries++ {
		reply, sent, ferr := b.fwd.roundTrip(ctx, addr, r.conn.proto, r.raw)
		switch {
		case ferr == nil:
			r.c.WriteRaw(reply)
			return
		case sent, tries == maxRedispatch || !b.awaitLeaderChange(ctx, addr):
			// UNCERTAIN if it may have reached the leader; NOLEADER if
			// not, and no other leader turned up.
			writeError(r.c, forwardFailed(addr, sent, ferr))
			return
		}
		// The command went nowhere and the leader changed: send it to the
		// new one, within the same deadline. If this node now leads, run
		// the command here, once (it gets a fresh deadline, so a request
		// takes at most twice --request-timeout).
		id, next := b.locker.Leader()
		if id == b.locker.ID() {
			b.redispatch(ctx, r)
			return
		}
		addr = next
	}
}

// redispatch runs a command that provably went nowhere again on this node,
// which leads now, once (it gets a fresh deadline, so a request takes at
// most twice --request-timeout).
func (b *Bridge) redispatch(_ context.Context, r *request) {
	if r.redispatched > 0 {
		writeErr(r.c, server.ErrNoLeader)
		return
	}
	r.redispatched++
	b.cmds[strings.ToLower(string(r.args[0]))](b, r)
}

// maxRedispatch bounds how often one command is run again after the leader
// changed under it.
const maxRedispatch = 3

// awaitLeaderChange waits until a leader other than the one at addr is
// known, or ctx ends.
func (b *Bridge) awaitLeaderChange(ctx context.Context, addr string) bool {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if id, a := b.locker.Leader(); id != "" && a != addr {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// requestCtx bounds one request by RequestTimeout plus extra.
func (b *Bridge) requestCtx(extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, b.cfg.RequestTimeout+extra)
}
