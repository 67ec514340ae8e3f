// Command fencerd is the fencer server: a Raft-replicated lock service that
// speaks RESP. With no flags it serves a one-node cluster on 127.0.0.1:7379,
// keeping its state in ./fencer-data.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencerlock/fencer/redisbridge"
	"github.com/fencerlock/fencer/server"
	"github.com/spf13/cobra"
)

// defaultGCPercent is the Go collector's target unless GOGC is set. A large
// lock table is many small objects; Go's default, 100, lets the heap grow
// to twice the live heap between collections, 50 to one and a half times
// (docs/performance-log.md has the resident sizes of a million locks at
// both). With the few locks most deployments hold, collections are cheap
// either way.
const defaultGCPercent = 50

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

type options struct {
	id, dataDir, listen, raftListen, raftAdvertise string
	advertise, httpListen, restore, logStore       string
	join                                           []string
	logLevel, raftLogLevel                         string
	minTTL, maxTTL, maxWait, requestTimeout        time.Duration
	snapshotThreshold, raftTrailingLogs            uint64
	snapshotInterval                               time.Duration
	defaultLockTTL                                 time.Duration
	redlockMultiEndpoint                           bool
	maxLocks, maxArgs, maxBulkLen                  int
	maxValueSize, maxWriteSize                     int
	scriptTimeLimit                                time.Duration
	maxBatch                                       int
	maxClients, maxPipeline                        int
	idleTimeout                                    time.Duration
	requirePass, usersFile, forwardUser            string
	protectedMode                                  bool
	tlsCert, tlsKey, tlsCA                         string
	tlsAuthClients, raftTLS, pprof                 bool
}

func newCommand() *cobra.Command {
	def := server.DefaultConfig()
	o := options{}
	cmd := &cobra.Command{
		Use:   "fencerd",
		Short: "fencer server: Raft-replicated locks with fencing tokens, over RESP",
		Long: `fencerd serves fencer's lock service. With no flags it starts (or restarts)
a one-node cluster on 127.0.0.1:7379 with its state in ./fencer-data.

Try it with redis-cli:
  redis-cli -p 7379 FENCE.ACQUIRE mylock me 10000`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return run(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.id, "id", "", "node ID (default: generated once and saved in the data directory)")
	f.StringVar(&o.dataDir, "data-dir", "./"+def.DataDir, "directory for the Raft log, snapshots and node ID")
	f.StringVar(&o.listen, "listen", "127.0.0.1:7379", "RESP address for clients")
	f.StringVar(&o.advertise, "advertise", "", "client address other nodes and clients use for this node (default: --listen)")
	f.StringSliceVar(&o.join, "join", nil, "client addresses of existing members to join through (addr[,addr]); ignored once the data directory has state")
	f.StringVar(&o.raftListen, "raft-listen", "", "Raft address (default: the --listen host, port + 1)")
	f.BoolVar(&o.pprof, "pprof", false, "also serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on --http-listen (for performance work; keep that port private)")
	f.StringVar(&o.logStore, "log-store", "", `Raft log store of a new data dir: "wal" (raft-wal, one fsync per batch; the default) or "bolt" (raft-boltdb, two); a data dir keeps the store it has, and naming the other is an error`)
	f.StringVar(&o.httpListen, "http-listen", "", `HTTP address for /metrics, /healthz and /readyz (default: the --listen host, port + 2; "off" disables)`)
	f.StringVar(&o.restore, "restore", "", "seed a new one-node cluster from a file written by 'fencer snapshot save' (needs an empty --data-dir; see docs/operations.md)")
	f.StringVar(&o.raftAdvertise, "raft-advertise", "", "Raft address other nodes dial (default: --raft-listen)")
	f.DurationVar(&o.minTTL, "min-ttl", def.MinTTL, "shortest lease TTL a client may ask for")
	f.DurationVar(&o.maxTTL, "max-ttl", def.MaxTTL, "longest lease TTL a client may ask for")
	f.DurationVar(&o.maxWait, "max-wait", def.MaxWait, "longest WAIT an acquire may queue for")
	f.DurationVar(&o.requestTimeout, "request-timeout", redisbridge.DefaultConfig().RequestTimeout, "bound on every request (a WAIT gets its wait on top)")
	f.DurationVar(&o.defaultLockTTL, "default-lock-ttl", redisbridge.DefaultConfig().DefaultLockTTL, "lease of a lock taken by SETNX, or SET NX without PX/EX (Redis would keep it forever)")
	f.BoolVar(&o.redlockMultiEndpoint, "redlock-multi-endpoint", false, "make SET NX, the release and extend scripts idempotent per value, so a Redlock client may be given every node as if they were independent masters; safe only if every lock attempt uses a unique value (see docs/redlock.md)")
	bdef := redisbridge.DefaultConfig()
	f.IntVar(&o.maxLocks, "max-locks", def.MaxLocks, "most locks held in total; an acquire of a free lock beyond it is refused")
	f.IntVar(&o.maxValueSize, "max-value-size", def.MaxValueSize, "largest value a Redis command or script stores, in bytes (a string, or a whole hash, sorted set, list or set)")
	f.IntVar(&o.maxWriteSize, "max-write-size", def.MaxWriteSize, "most bytes one Redis command or script writes in all (its Raft entry)")
	f.DurationVar(&o.scriptTimeLimit, "script-time-limit", redisbridge.DefaultConfig().ScriptTimeLimit, "longest a Lua script may run; a script stopped by it has no effect")
	f.IntVar(&o.maxBatch, "max-batch", def.MaxBatch, "most commands the leader puts into one Raft entry (group commit); 1 writes one per entry, which older fencerd versions can read")
	f.IntVar(&o.maxArgs, "max-args", bdef.MaxArgs, "most arguments in one command")
	f.IntVar(&o.maxBulkLen, "max-bulk-len", bdef.MaxBulkLen, "longest argument in bytes")
	f.IntVar(&o.maxClients, "max-clients", bdef.MaxClients, "most open client connections")
	f.IntVar(&o.maxPipeline, "max-pipeline", bdef.MaxPipeline, "most commands served from one connection's read batch")
	f.DurationVar(&o.idleTimeout, "idle-timeout", bdef.IdleTimeout, "close a connection idle this long (0: never)")
	f.StringVar(&o.requirePass, "requirepass", "", `password of the user "default" (pattern *); turns authentication on`)
	f.StringVar(&o.usersFile, "users", "", "users file (one 'user password pattern [maxlocks=N]' a line; see docs/security.md); turns authentication on")
	f.StringVar(&o.forwardUser, "forward-user", "", `user of --users this node authenticates as to forward and join (pattern *, plain-text password; default "default" with --requirepass)`)
	f.BoolVar(&o.protectedMode, "protected-mode", true, "refuse to listen on a non-loopback address without authentication")
	f.StringVar(&o.tlsCert, "tls-cert-file", "", "serve RESP over TLS with this certificate (PEM); the node also presents it when it forwards or joins")
	f.StringVar(&o.tlsKey, "tls-key-file", "", "private key of --tls-cert-file (PEM)")
	f.StringVar(&o.tlsCA, "tls-ca-cert-file", "", "CA certificates (PEM) that client and node certificates are verified against (default: the system's, for dialing other nodes)")
	f.BoolVar(&o.tlsAuthClients, "tls-auth-clients", true, "with --tls-ca-cert-file, require a client certificate signed by it")
	f.BoolVar(&o.raftTLS, "raft-tls", false, "run Raft over mutual TLS with --tls-cert-file, verified against --tls-ca-cert-file (needs both)")
	f.Uint64Var(&o.snapshotThreshold, "snapshot-threshold", def.SnapshotThreshold, "Raft log entries, or commands applied (an entry may hold a batch), between snapshots")
	f.DurationVar(&o.snapshotInterval, "snapshot-interval", def.SnapshotInterval, "how often Raft and the node check whether to snapshot")
	f.Uint64Var(&o.raftTrailingLogs, "raft-trailing-logs", def.TrailingLogs, "Raft log entries kept behind a snapshot, so that a follower a little behind catches up from the log instead of a snapshot")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&o.raftLogLevel, "raft-log-level", def.RaftLogLevel, "level of Raft's own log: trace, debug, info, warn, error, off")
	return cmd
}

// raftAddrFor derives the default Raft address: the client host, port + 1.
func raftAddrFor(listen string) (string, error) { return addrBeside(listen, 1, "--raft-listen") }

// addrBeside derives a default address from --listen: its host, port + off.
func addrBeside(listen string, off int, flag string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w", listen, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p+off > 65535 {
		return "", fmt.Errorf("--listen %q: need a fixed port below %d to derive %s; set %s", listen, 65536-off, flag, flag)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+off)), nil
}

func run(ctx context.Context, o options) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cfg := server.DefaultConfig()
	cfg.ID, cfg.DataDir, cfg.Logger = o.id, o.dataDir, logger
	cfg.RaftAddr, cfg.RaftAdvertise, cfg.ClientAddr = o.raftListen, o.raftAdvertise, o.advertise
	cfg.Join = len(o.join) > 0
	cfg.MinTTL, cfg.MaxTTL, cfg.MaxWait, cfg.RaftLogLevel = o.minTTL, o.maxTTL, o.maxWait, o.raftLogLevel
	cfg.SnapshotThreshold, cfg.SnapshotInterval = o.snapshotThreshold, o.snapshotInterval
	cfg.TrailingLogs = o.raftTrailingLogs
	cfg.MaxLocks, cfg.MaxBatch = o.maxLocks, o.maxBatch
	cfg.MaxValueSize, cfg.MaxWriteSize = o.maxValueSize, o.maxWriteSize
	if kind, err := server.StoreKind(o.dataDir, o.logStore); err == nil {
		// A data dir with a store keeps it; the flag only picks a new one.
		cfg.LogStore = kind
	} else {
		return err
	}
	if cfg.RaftAddr == "" {
		a, err := raftAddrFor(o.listen)
		if err != nil {
			return err
		}
		cfg.RaftAddr = a
	}
	bcfg := redisbridge.DefaultConfig()
	bcfg.RequestTimeout, bcfg.Logger = o.requestTimeout, logger
	bcfg.DefaultLockTTL, bcfg.RedlockMultiEndpoint = o.defaultLockTTL, o.redlockMultiEndpoint
	bcfg.MaxArgs, bcfg.MaxBulkLen, bcfg.MaxClients = o.maxArgs, o.maxBulkLen, o.maxClients
	bcfg.MaxPipeline, bcfg.IdleTimeout = o.maxPipeline, o.idleTimeout
	bcfg.ScriptTimeLimit = o.scriptTimeLimit
	bcfg.RequirePass, bcfg.ForwardUser = o.requirePass, o.forwardUser
	if o.usersFile != "" {
		users, err := redisbridge.LoadUsers(o.usersFile)
		if err != nil {
			return err
		}
		bcfg.Users = users
		for _, u := range users {
			if u.MaxLocks > 0 {
				cfg.Quotas = append(cfg.Quotas, server.Quota{Name: "user " + u.Name, Pattern: u.Pattern, Max: u.MaxLocks})
			}
		}
	}
	if err := checkProtectedMode(o, bcfg); err != nil {
		return err
	}
	certs, err := loadCertStore(o)
	if err != nil {
		return err
	}
	bcfg.TLS, bcfg.ForwardTLS = certs.serverConfig(), certs.dialConfig()
	if cfg.RaftTLS, err = raftTLSConfig(o, certs); err != nil {
		return err
	}
	defer reloadOnSIGHUP(certs, logger)()
	if o.defaultLockTTL < o.minTTL || o.defaultLockTTL > o.maxTTL {
		return fmt.Errorf("--default-lock-ttl %v is outside --min-ttl %v .. --max-ttl %v", o.defaultLockTTL, o.minTTL, o.maxTTL)
	}
	if err := bcfg.Validate(); err != nil {
		return withFlagHints(err)
	}
	// Listen first: a port in use is reported before Raft touches the data,
	// and the bound address (port 0 resolved) is what others are told.
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if cfg.ClientAddr == "" {
		cfg.ClientAddr = ln.Addr().String()
	}
	httpLn, err := listenHTTP(o, logger)
	if err != nil {
		_ = ln.Close()
		return err
	}
	closeHTTP := func() {
		if httpLn != nil {
			_ = httpLn.Close()
		}
	}
	if err := cfg.Validate(); err != nil {
		_ = ln.Close()
		closeHTTP()
		return withFlagHints(err)
	}
	var snapshot []byte
	if o.restore != "" {
		if o.join != nil {
			_ = ln.Close()
			closeHTTP()
			return errors.New("--restore starts a new cluster: it cannot be combined with --join")
		}
		if snapshot, err = readSnapshot(o.restore); err != nil {
			_ = ln.Close()
			closeHTTP()
			return err
		}
	}
	// A node with no Raft state joins only under an ID that is not a
	// member: a member whose state was lost must be removed first. The
	// leader is asked before this node's Raft starts.
	cfg.CheckJoin = func(id string) error {
		user, pass := forwardCredentials(bcfg)
		return redisbridge.CheckNotMember(ctx, o.join, cfg.ClientAddr, id, user, pass, bcfg.ForwardTLS, logger)
	}
	node, err := server.Open(cfg)
	if err != nil {
		_ = ln.Close()
		closeHTTP()
		return err
	}
	if snapshot != nil {
		if err := restoreSnapshot(ctx, node, snapshot, logger); err != nil {
			_ = ln.Close()
			closeHTTP()
			_ = node.Close()
			return err
		}
	}
	bridge, err := redisbridge.New(node, bcfg)
	if err != nil {
		_ = ln.Close()
		closeHTTP()
		_ = node.Close()
		return err
	}
	httpSrv := serveHTTP(httpLn, node, logger, o.pprof)
	serveErr := make(chan error, 1)
	go func() { serveErr <- bridge.Serve(ln) }()
	logger.Info("fencerd serving", "id", node.ID(), "listen", ln.Addr().String(), "raft", node.RaftAddr(), "data_dir", cfg.DataDir)
	if node.NeedsJoin() {
		go func() {
			user, pass := forwardCredentials(bcfg)
			if err := redisbridge.JoinClusterAs(ctx, o.join, node.ID(), node.RaftAddr(), cfg.ClientAddr, user, pass, bcfg.ForwardTLS, logger); err != nil {
				logger.Warn("gave up joining", "err", err)
			}
		}()
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err = <-serveErr:
		logger.Error("RESP server stopped", "err", err)
	}
	_ = bridge.Close()
	if httpSrv != nil {
		_ = httpSrv.Close()
	}
	if cerr := node.Close(); cerr != nil && !errors.Is(cerr, context.Canceled) {
		logger.Warn("closing node", "err", cerr)
	}
	logger.Info("stopped")
	return err
}

// withFlagHints names the flag that sets each config field an error mentions.
func withFlagHints(err error) error {
	hints := []struct{ field, flag string }{
		{"ClientAddr", "--advertise"}, {"RaftAdvertise", "--raft-advertise"}, {"RaftAddr", "--raft-listen"},
		{"MinTTL", "--min-ttl"}, {"MaxTTL", "--max-ttl"}, {"MaxWait", "--max-wait"}, {"DataDir", "--data-dir"},
		{"SnapshotThreshold", "--snapshot-threshold"}, {"SnapshotInterval", "--snapshot-interval"}, {"TrailingLogs", "--raft-trailing-logs"},
		{"MaxLocks", "--max-locks"}, {"MaxBatch", "--max-batch"}, {"MaxValueSize", "--max-value-size"},
		{"MaxWriteSize", "--max-write-size"}, {"ScriptTimeLimit", "--script-time-limit"}, {"MaxArgs", "--max-args"}, {"MaxBulkLen", "--max-bulk-len"},
		{"MaxClients", "--max-clients"}, {"MaxPipeline", "--max-pipeline"}, {"IdleTimeout", "--idle-timeout"},
		{"Users", "--users"}, {"RequirePass", "--requirepass"}, {"ForwardUser", "--forward-user"},
	}
	var used []string
	for _, h := range hints {
		if strings.Contains(err.Error(), "config "+h.field+":") {
			used = append(used, h.flag)
		}
	}
	if len(used) == 0 {
		return err
	}
	return fmt.Errorf("%w\n(set with %s)", err, strings.Join(used, ", "))
}

// checkProtectedMode refuses, as Redis's protected mode does, to serve
// without authentication on an address other hosts can reach.
func checkProtectedMode(o options, bcfg redisbridge.Config) error {
	if !o.protectedMode || bcfg.RequirePass != "" || len(bcfg.Users) > 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", o.listen, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen %s is not a loopback address and no password is set: refusing to serve without authentication (protected mode); set --requirepass or --users, or --protected-mode=false", o.listen)
}

// forwardCredentials returns the user and password the node joins as, or
// empty strings without authentication.
func forwardCredentials(bcfg redisbridge.Config) (user, password string) {
	name := bcfg.ForwardUser
	if name == "" && bcfg.RequirePass != "" {
		return redisbridge.DefaultUser, bcfg.RequirePass
	}
	for _, u := range bcfg.Users {
		if u.Name == name {
			return u.Name, u.Password
		}
	}
	return "", ""
}
