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

// Locker is what the bridge needs of a fencer node (*server.Node). Each
// part is declared beside the commands that use it: the locks (native.go),
// sessions (session.go), shared locks and several keys at once
// (shared.go), the cluster (admin.go), watches (watch.go), snapshots
// (snapshot.go), and the transactions of the Redis-compatible layer
// (rediscompat.Node).
type Locker interface {
	lockNode
	sessionNode
	sharedNode
	clusterNode
	watchNode
	snapshotNode
	rediscompat.Node
	// DefaultLockTTL is the lease of a lock taken without a TTL (SETNX).
	DefaultLockTTL() time.Duration
	healthNode
	listNode
	formingNode
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
	// nodeUser is the user a forwarding node authenticated as; each
	// command on its connection starts as that user (see onbehalf.go).
	nodeUser *User
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
	// pwatches are the prefixes it watches (FENCE.WATCH PREFIX), likewise.
	pwatches map[string]*connWatch
	// user is the authenticated user; nil before AUTH (or always, when
	// authentication is off).
	user *User
	// origin, on a forwarding connection, is the client a forwarded
	// command came from (FENCE.ONBEHALFCLIENT), for one command.
	origin *server.ClientInfo
	// batchLeft is how many commands of the current read batch follow the
	// one being handled; batchPos is its position in the batch.
	batchLeft, batchPos int
}

// Bridge serves RESP on one listener.
type Bridge struct {
	cfg     Config
	locker  Locker
	log     *slog.Logger
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
	go b.probeMembers()
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
	if st.forwarded {
		// A forwarded request runs as the user it names (FENCE.ONBEHALF),
		// a bare one as the forwarding node's user.
		st.user, st.origin = st.nodeUser, nil
	}
	b.dispatch(c, st, cmd.Args, cmd.Raw)
}

// dispatch checks and runs one command on st's connection.
func (b *Bridge) dispatch(c redcon.Conn, st *connState, args [][]byte, raw []byte) {
	cmd := redcon.Command{Args: args, Raw: raw}
	name := strings.ToLower(string(cmd.Args[0]))
	entry := commands[name]
	if e := b.permission(st, entry, name, cmd.Args); e.Code != "" {
		writeError(c, e)
		return
	}
	if entry == nil {
		writeError(c, unknownCommand(cmd.Args))
		return
	}
	if st.proto == 2 && st.sub != nil && (st.sub.count() > 0 || st.watching()) && entry.flags&whileSubscribed == 0 {
		// RESP2 cannot tell a reply from a message: Redis allows only these
		// while subscribed.
		writeError(c, errf("Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", commandName(cmd.Args)))
		return
	}
	r := &request{c: c, args: cmd.Args, raw: cmd.Raw, conn: st}
	if !entry.arityOK(len(cmd.Args)) {
		wrongArity(r)
		return
	}
	if action, ok := audited(name, cmd.Args); ok {
		b.audit(r, action)
	}
	entry.handler(b, r)
}

// commandName is the name Redis reports for a command: "get", or
// "client|info" for a subcommand.
func commandName(args [][]byte) string {
	name := strings.ToLower(string(args[0]))
	if c := commands[name]; len(args) > 1 && c != nil && c.subcommands != nil {
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
		reply, sent, ferr := b.forward(ctx, addr, r, r.raw, r.args)
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
	commands[strings.ToLower(string(r.args[0]))].handler(b, r)
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
