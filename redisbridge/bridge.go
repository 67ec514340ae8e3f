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
	// Sessions (see server.Node.OpenSession).
	OpenSession(ctx context.Context, ttl time.Duration, user string) (uint64, error)
	SessionUser(ctx context.Context, id uint64) (user string, open bool, err error)
	KeepAlive(ctx context.Context, id uint64) (taken uint64, alive bool, err error)
	CloseSession(ctx context.Context, id uint64) (bool, error)
	RevokeSession(ctx context.Context, id uint64) (bool, error)
	Session(ctx context.Context, id uint64) (server.SessionStatus, bool, error)
	AcquireInSession(ctx context.Context, session uint64, key, owner, value string, wait time.Duration) (server.Grant, bool, error)
	ReleaseInSession(ctx context.Context, session uint64, key, owner string) (bool, error)
	Proclaim(ctx context.Context, session uint64, key, owner, value string) (bool, error)
	// Read-write locks, semaphores and several keys at once (see
	// server.Node.AcquireShared and AcquireMany).
	AcquireShared(ctx context.Context, a server.SharedAcquire) (server.Grant, bool, error)
	Holders(ctx context.Context, key string) ([]server.Holding, error)
	AcquireMany(ctx context.Context, a server.MultiAcquire) (server.Grant, bool, error)
	ExtendMany(ctx context.Context, keys []string, owner string, ttl time.Duration) (int, error)
	ReleaseMany(ctx context.Context, keys []string, owner string, session uint64) (int, error)
	ID() string
	// ClusterID is the cluster's ID, "" before one was committed.
	ClusterID() string
	Leader() (id, clientAddr string)
	Members(ctx context.Context) ([]server.Member, error)
	// DefaultLockTTL is the lease of a lock taken without a TTL (SETNX).
	DefaultLockTTL() time.Duration
	// PeerAddrs returns the client addresses of the other members.
	PeerAddrs() []string
	Join(ctx context.Context, id, raftAddr, clientAddr string) error
	Remove(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, id string) error
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
	// watches are the keys the connection watches (FENCE.WATCH), touched
	// only by the goroutine serving its commands.
	watches map[string]*connWatch
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

// New returns a bridge serving locker; call Serve to start it. It refuses
// a config that Validate refuses.
func New(locker Locker, cfg Config) (*Bridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	users, fwdAuth, err := cfg.userTable()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Bridge{cfg: cfg, locker: locker, log: logger, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		users: users, fwd: newForwarder(fwdAuth, cfg.ForwardTLS), hub: newHub(), start: time.Now()}
	b.engine = rediscompat.New(locker, rediscompat.Config{
		RedlockMultiEndpoint: cfg.RedlockMultiEndpoint,
		DefaultLockTTL:       locker.DefaultLockTTL(),
		ScriptTimeLimit:      cfg.ScriptTimeLimit,
		Logger:               logger,
		Publish: func(shard bool, channel string, msg []byte) int {
			n := b.publishLocal(shard, channel, msg)
			b.relayPublish(shard, []byte(channel), msg)
			return n
		},
	})
	b.cmds = map[string]handler{
		"ping":             (*Bridge).ping,
		"quit":             (*Bridge).quit,
		"echo":             (*Bridge).echo,
		"hello":            (*Bridge).hello,
		"auth":             (*Bridge).auth,
		"select":           (*Bridge).selectDB,
		"client":           (*Bridge).client,
		"info":             (*Bridge).info,
		"command":          (*Bridge).command,
		"reset":            (*Bridge).reset,
		"subscribe":        (*Bridge).subscribe,
		"ssubscribe":       (*Bridge).subscribe,
		"unsubscribe":      (*Bridge).unsubscribe,
		"sunsubscribe":     (*Bridge).unsubscribe,
		"wait":             (*Bridge).wait,
		"psubscribe":       (*Bridge).subscribe,
		"punsubscribe":     (*Bridge).unsubscribe,
		"publish":          (*Bridge).publish,
		"spublish":         (*Bridge).publish,
		"fence.acquire":    (*Bridge).acquire,
		"fence.extend":     (*Bridge).extend,
		"fence.release":    (*Bridge).release,
		"fence.revoke":     (*Bridge).revoke,
		"fence.status":     (*Bridge).status,
		"fence.token":      (*Bridge).token,
		"fence.check":      (*Bridge).check,
		"fence.session":    (*Bridge).session,
		"fence.proclaim":   (*Bridge).proclaim,
		"fence.holder":     (*Bridge).holder,
		"fence.rlock":      (*Bridge).rwlock,
		"fence.wlock":      (*Bridge).rwlock,
		"fence.semacquire": (*Bridge).semacquire,
		"fence.holders":    (*Bridge).holders,
		"fence.macquire":   (*Bridge).macquire,
		"fence.mextend":    (*Bridge).mextend,
		"fence.mrelease":   (*Bridge).mrelease,
		"fence.leader":     (*Bridge).leader,
		"fence.watch":      (*Bridge).watch,
		"fence.unwatch":    (*Bridge).unwatch,

		"fence.members":   (*Bridge).members,
		"fence.cluster":   (*Bridge).cluster,
		"fence.forming":   (*Bridge).forming,
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
	if st.proto == 2 && st.sub != nil && (st.sub.count() > 0 || st.watching()) && !allowedWhileSubscribed[name] {
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
