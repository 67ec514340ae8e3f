package redisbridge

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fencerlock/fencer/server"
)

// Config configures a Bridge. Start from DefaultConfig and change what you
// need; Validate names every field that is wrong, as server.Config's does.
// A field whose zero value means something says so (IdleTimeout 0: never;
// no Users: no authentication; nil TLS: plain TCP); any other field left at
// zero is reported, not replaced by its default.
type Config struct {
	// RequestTimeout bounds every request; a waiting acquire gets its wait
	// on top. A write still in flight when it passes is answered with
	// -UNCERTAIN. The default is 10s.
	RequestTimeout time.Duration
	// Logger receives the bridge's logs; nil means slog.Default().
	Logger *slog.Logger
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
	return Config{RequestTimeout: 10 * time.Second, ScriptTimeLimit: 5 * time.Second,
		MaxArgs: 1024, MaxBulkLen: 1 << 20, MaxClients: 10000, MaxPipeline: 1000}
}

// Validate reports every invalid field, each as a *server.ConfigError.
func (c *Config) Validate() error {
	var errs []error
	positive := func(field string, v time.Duration) {
		if v <= 0 {
			errs = append(errs, configError(field, "must be positive, got %v", v))
		}
	}
	positive("RequestTimeout", c.RequestTimeout)
	positive("ScriptTimeLimit", c.ScriptTimeLimit)
	for _, l := range []struct {
		field string
		v     int
	}{{"MaxArgs", c.MaxArgs}, {"MaxBulkLen", c.MaxBulkLen}, {"MaxClients", c.MaxClients}, {"MaxPipeline", c.MaxPipeline}} {
		if l.v <= 0 {
			errs = append(errs, configError(l.field, "must be positive, got %d", l.v))
		}
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, configError("IdleTimeout", "must not be negative, got %v", c.IdleTimeout))
	}
	if _, _, err := c.userTable(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// configError reports an invalid field of Config.
func configError(field, format string, args ...any) error {
	return &server.ConfigError{Pkg: "redisbridge", Field: field, Reason: fmt.Sprintf(format, args...)}
}
