package redisbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/tidwall/redcon"
)

// Locker is what the bridge needs of a fencer node (*server.Node).
type Locker interface {
	Acquire(ctx context.Context, key, owner string, ttl, wait time.Duration) (server.Grant, bool, error)
	Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error)
	Release(ctx context.Context, key, owner string) (bool, error)
	Revoke(ctx context.Context, key string) (bool, error)
	Status(ctx context.Context, key string) (server.Status, bool, error)
	Check(ctx context.Context, key string, token uint64) (bool, error)
	Leader() (id, clientAddr string)
}

// Config configures a Bridge.
type Config struct {
	// RequestTimeout bounds every request; a waiting acquire gets its wait
	// on top. A write still in flight when it passes is answered with
	// -UNCERTAIN. The default is 10s.
	RequestTimeout time.Duration
	// Logger receives the bridge's logs; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the bridge's defaults.
func DefaultConfig() Config {
	return Config{RequestTimeout: 10 * time.Second}
}

// Validate reports an invalid field.
func (c *Config) Validate() error {
	if c.RequestTimeout <= 0 {
		return fmt.Errorf("redisbridge: config RequestTimeout: must be positive, got %v", c.RequestTimeout)
	}
	return nil
}

// handler serves one command; args[0] is the command name.
type handler func(b *Bridge, c redcon.Conn, args [][]byte)

// Bridge serves RESP on one listener.
type Bridge struct {
	cfg    Config
	locker Locker
	log    *slog.Logger
	cmds   map[string]handler
	srv    *redcon.Server
	ln     net.Listener

	ctx    context.Context // cancelled by Close: ends every waiting request
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
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
	ctx, cancel := context.WithCancel(context.Background())
	b := &Bridge{cfg: cfg, locker: locker, log: logger, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	b.cmds = map[string]handler{
		"ping":          (*Bridge).ping,
		"quit":          (*Bridge).quit,
		"fence.acquire": (*Bridge).acquire,
		"fence.extend":  (*Bridge).extend,
		"fence.release": (*Bridge).release,
		"fence.revoke":  (*Bridge).revoke,
		"fence.status":  (*Bridge).status,
		"fence.token":   (*Bridge).token,
		"fence.check":   (*Bridge).check,
		"fence.leader":  (*Bridge).leader,
	}
	return b, nil
}

// Serve accepts connections on ln until Close. It returns nil after Close.
func (b *Bridge) Serve(ln net.Listener) error {
	b.ln = ln
	b.srv = redcon.NewServerNetwork(ln.Addr().Network(), ln.Addr().String(), b.handle, nil, nil)
	b.srv.AcceptError = func(err error) { b.log.Warn("accept failed", "err", err) }
	defer close(b.done)
	return b.srv.Serve(ln)
}

// Close stops accepting, ends waiting requests and closes every connection.
func (b *Bridge) Close() error {
	var err error
	b.once.Do(func() {
		b.cancel()
		if b.srv != nil {
			err = b.srv.Close()
			<-b.done
		}
	})
	return err
}

func (b *Bridge) handle(c redcon.Conn, cmd redcon.Command) {
	name := strings.ToLower(string(cmd.Args[0]))
	h, ok := b.cmds[name]
	if !ok {
		c.WriteError(unknownCommand(cmd.Args))
		return
	}
	h(b, c, cmd.Args)
}

// unknownCommand is Redis's wording for a command it does not have.
func unknownCommand(args [][]byte) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "ERR unknown command '%s', with args beginning with: ", truncate(args[0], 128))
	for i, a := range args[1:] {
		if i == 8 {
			break
		}
		fmt.Fprintf(&sb, "'%s' ", truncate(a, 128))
	}
	return sb.String()
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
func wrongArity(c redcon.Conn, args [][]byte) {
	c.WriteError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(string(args[0]))))
}

// writeErr answers a server error with a reply whose first word says what
// kind it is, so clients can tell "unknown outcome" from "not granted".
func writeErr(c redcon.Conn, err error) {
	var nl *server.NotLeaderError
	switch {
	case errors.Is(err, server.ErrInvalidArgument):
		c.WriteError("ERR " + strings.TrimPrefix(err.Error(), "server: "))
	case errors.Is(err, server.ErrUnknownOutcome):
		c.WriteError("UNCERTAIN " + strings.TrimPrefix(err.Error(), "server: ") + "; the command may or may not have taken effect: retry it with the same owner")
	case errors.As(err, &nl):
		c.WriteError("NOTLEADER " + strings.TrimPrefix(nl.Error(), "server: "))
	case errors.Is(err, server.ErrNoLeader):
		c.WriteError("NOLEADER no leader is available; retry later")
	case errors.Is(err, server.ErrShutdown), errors.Is(err, context.Canceled):
		c.WriteError("SHUTDOWN the server is shutting down")
	default:
		c.WriteError("ERR " + err.Error())
	}
}

// requestCtx bounds one request by RequestTimeout plus extra.
func (b *Bridge) requestCtx(extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, b.cfg.RequestTimeout+extra)
}
