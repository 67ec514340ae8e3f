package main

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/fencerlock/fencer/redisbridge"
	"github.com/fencerlock/fencer/server"
	"github.com/spf13/cobra"
)

// config is what fencerd's flags set. Most flags are bound to a field of
// the node's or the bridge's config, whose DefaultConfig gives the flag's
// default; the rest belong to neither.
type config struct {
	node   server.Config
	bridge redisbridge.Config

	listen     string   // --listen: where the RESP server listens
	httpListen string   // --http-listen
	ui         string   // --ui: the web console's address ("" off)
	join       []string // --join: sets node.Join
	restore    string   // --restore
	usersFile  string   // --users: sets bridge.Users and node.Quotas
	passFile   string   // --requirepass-file: sets bridge.RequirePass
	configFile string   // --config: read by applySources, before run
	logLevel   string   // --log-level: sets node.Logger and bridge.Logger
	logFormat  string   // --log-format: text or json
	protected  bool     // --protected-mode
	pprof      bool     // --pprof
	tls        tlsFlags
}

// tlsFlags are the --tls-* files and switches.
type tlsFlags struct {
	cert, key, ca string
	authClients   bool // --tls-auth-clients
	raft          bool // --raft-tls
	// reloadEvery is --tls-reload-interval: how often the files are
	// looked at for changes (reload.go).
	reloadEvery time.Duration
}

// defaultConfig is fencerd without flags.
func defaultConfig() *config {
	c := &config{node: server.DefaultConfig(), bridge: redisbridge.DefaultConfig(),
		logLevel: "info", logFormat: "text", protected: true, tls: tlsFlags{authClients: true, reloadEvery: 30 * time.Second}}
	// fencerd listens where a default node is reached and, unless told
	// otherwise, advertises what it bound and derives the Raft address
	// from --listen (addrBeside).
	c.listen, c.node.ClientAddr, c.node.RaftAddr = c.node.ClientAddr, "", ""
	c.node.DataDir = "./" + c.node.DataDir
	return c
}

// bindFlags binds cmd's flags to c's fields, with c's values as defaults.
func (c *config) bindFlags(cmd *cobra.Command) {
	f, n, b := cmd.Flags(), &c.node, &c.bridge
	f.StringVar(&n.ID, "id", n.ID, "node ID, at most 512 bytes (default: generated once and saved in the data directory)")
	f.StringVar(&n.DataDir, "data-dir", n.DataDir, "directory for the Raft log, snapshots and node ID")
	f.StringVar(&c.listen, "listen", c.listen, "RESP address for clients")
	f.StringVar(&n.ClientAddr, "advertise", n.ClientAddr, "client address other nodes and clients use for this node (default: --listen)")
	f.StringSliceVar(&c.join, "join", c.join, "client addresses of existing members to join through (addr[,addr]); ignored once the data directory has state")
	f.IntVar(&n.BootstrapExpect, "bootstrap-expect", n.BootstrapExpect, "form a new cluster of this many servers, started alike with the same --join list of all of them: each without state waits until it reaches all of them, then they bootstrap together; a server that finds a cluster formed joins it (see docs/operations.md)")
	f.StringVar(&n.RaftAddr, "raft-listen", n.RaftAddr, "Raft address (default: the --listen host, port + 1)")
	f.BoolVar(&c.pprof, "pprof", c.pprof, "also serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on --http-listen (for performance work; keep that port private)")
	f.StringVar(&c.httpListen, "http-listen", c.httpListen, `HTTP address for /metrics, /healthz and /readyz (default: the --listen host, port + 2; "off" disables)`)
	f.StringVar(&c.ui, "ui", c.ui, "serve the web console on this address (off unless set): over TLS with --tls-cert-file, else only on a loopback address unless --protected-mode=false; needs --users or --requirepass (see docs/operations.md)")
	f.StringVar(&c.restore, "restore", c.restore, "seed a new one-node cluster from a file written by 'fencer snapshot save' (needs an empty --data-dir; see docs/operations.md)")
	f.StringVar(&n.RaftAdvertise, "raft-advertise", n.RaftAdvertise, "Raft address other nodes dial (default: --raft-listen); a host name is kept as a name in the cluster's configuration and resolved at every dial")
	f.DurationVar(&n.MinTTL, "min-ttl", n.MinTTL, "shortest TTL of a native lease (FENCE.* acquires and extends) or a session a client may ask for, and of --default-lock-ttl; not the TTL of a Redis command (SET PX, PEXPIRE keep Redis's range: see docs/redlock.md)")
	f.DurationVar(&n.MaxTTL, "max-ttl", n.MaxTTL, "longest TTL of a native lease (FENCE.* acquires and extends) or a session a client may ask for, and of --default-lock-ttl; not the TTL of a Redis command (SET PX, PEXPIRE keep Redis's range: see docs/redlock.md)")
	f.DurationVar(&n.MaxWait, "max-wait", n.MaxWait, "longest WAIT an acquire may queue for")
	f.DurationVar(&b.RequestTimeout, "request-timeout", b.RequestTimeout, "bound on every request (a WAIT gets its wait on top)")
	f.DurationVar(&n.DefaultLockTTL, "default-lock-ttl", n.DefaultLockTTL, "lease of a lock taken by SETNX, or SET NX without PX/EX (Redis would keep it forever)")
	f.BoolVar(&b.RedlockMultiEndpoint, "redlock-multi-endpoint", b.RedlockMultiEndpoint, "make SET NX, the release and extend scripts idempotent per value, so a Redlock client may be given every node as if they were independent masters (a value that released a key gets null or RELEASED for its writes of it); safe only if every lock attempt uses a unique value (see docs/redlock.md)")
	f.IntVar(&n.MaxLocks, "max-locks", n.MaxLocks, "most locks held in total; an acquire of a free lock beyond it is refused")
	f.IntVar(&n.MaxSessions, "max-sessions", n.MaxSessions, "most sessions open at once; an open beyond it is refused")
	f.IntVar(&n.MaxSessionLocks, "max-session-locks", n.MaxSessionLocks, "most locks one session holds; an acquire beyond it is refused")
	f.IntVar(&n.MaxValueSize, "max-value-size", n.MaxValueSize, "largest value a Redis command or script stores, in bytes (a string, or a whole hash, sorted set, list or set)")
	f.IntVar(&n.MaxWriteSize, "max-write-size", n.MaxWriteSize, "most bytes one Redis command or script writes in all (its Raft entry)")
	f.DurationVar(&b.ScriptTimeLimit, "script-time-limit", b.ScriptTimeLimit, "longest a Lua script may run; a script stopped by it has no effect")
	f.IntVar(&n.WatchWindow, "watch-window", n.WatchWindow, "watch events kept in memory, so that a watch resumed after a reconnect is sent what it missed (older history gets a reset)")
	f.IntVar(&n.MaxWatches, "max-watches", n.MaxWatches, "most watches (FENCE.WATCH) the node serves at once")
	f.IntVar(&n.MaxPrefixWatches, "max-prefix-watches", n.MaxPrefixWatches, "most watches of a prefix (FENCE.WATCH PREFIX) among them; each is matched against every change applied")
	f.IntVar(&n.MaxBatch, "max-batch", n.MaxBatch, "most commands the leader puts into one Raft entry (group commit); 1 writes one per entry")
	f.IntVar(&b.MaxArgs, "max-args", b.MaxArgs, "most arguments in one command")
	f.IntVar(&b.MaxBulkLen, "max-bulk-len", b.MaxBulkLen, "longest argument in bytes")
	f.IntVar(&b.MaxClients, "max-clients", b.MaxClients, "most open client connections")
	f.IntVar(&b.MaxPipeline, "max-pipeline", b.MaxPipeline, "most commands served from one connection's read batch")
	f.DurationVar(&b.IdleTimeout, "idle-timeout", b.IdleTimeout, "close a connection idle this long (0: never)")
	f.StringVar(&b.RequirePass, "requirepass", b.RequirePass, `password of the user "default" (pattern *); turns authentication on`)
	f.StringVar(&c.passFile, "requirepass-file", c.passFile, "file holding the password of --requirepass (one line), so that it is not on the command line")
	f.StringVar(&c.usersFile, "users", c.usersFile, "users file (one 'user password pattern [maxlocks=N]' a line; see docs/security.md); turns authentication on")
	f.StringVar(&b.ForwardUser, "forward-user", b.ForwardUser, `user of --users this node authenticates as to forward and join (pattern *, plain-text password; default "default" with --requirepass)`)
	f.BoolVar(&c.protected, "protected-mode", c.protected, "refuse to listen on a non-loopback address without authentication")
	f.StringVar(&c.tls.cert, "tls-cert-file", c.tls.cert, "serve RESP over TLS with this certificate (PEM); the node also presents it when it forwards or joins")
	f.StringVar(&c.tls.key, "tls-key-file", c.tls.key, "private key of --tls-cert-file (PEM)")
	f.StringVar(&c.tls.ca, "tls-ca-cert-file", c.tls.ca, "CA certificates (PEM) that client and node certificates are verified against (default: the system's, for dialing other nodes)")
	f.BoolVar(&c.tls.authClients, "tls-auth-clients", c.tls.authClients, "with --tls-ca-cert-file, require a client certificate signed by it")
	f.DurationVar(&c.tls.reloadEvery, "tls-reload-interval", c.tls.reloadEvery, "how often the --tls-* files are looked at, and reloaded when their contents changed (a Kubernetes Secret updated in place); 0: only on SIGHUP")
	f.BoolVar(&c.tls.raft, "raft-tls", c.tls.raft, "run Raft over mutual TLS with --tls-cert-file, verified against --tls-ca-cert-file (needs both)")
	f.Uint64Var(&n.SnapshotThreshold, "snapshot-threshold", n.SnapshotThreshold, "Raft log entries, or commands applied (an entry may hold a batch), between snapshots")
	f.DurationVar(&n.SnapshotInterval, "snapshot-interval", n.SnapshotInterval, "how often Raft and the node check whether to snapshot")
	f.Uint64Var(&n.TrailingLogs, "raft-trailing-logs", n.TrailingLogs, "Raft log entries kept behind a snapshot, so that a follower a little behind catches up from the log instead of a snapshot")
	f.DurationVar(&n.MemberUnreachableAfter, "member-unreachable-after", n.MemberUnreachableAfter, "on the leader, how long a member may leave the once-a-second health probe unanswered before it is reported unreachable (FENCE.HEALTH, fencer members)")
	f.Uint64Var(&n.MemberLagLimit, "member-lag-limit", n.MemberLagLimit, "entries a member may be behind the leader's commit index before it is reported unhealthy (0: --raft-trailing-logs, past which it needs a snapshot)")
	f.IntVar(&n.RaftSegmentSize, "raft-segment-size", n.RaftSegmentSize, "size in bytes of the Raft log's segment files (0: 64 MiB); the log is compacted a whole segment at a time")
	f.StringVar(&c.logLevel, "log-level", c.logLevel, "log level: debug, info, warn, error")
	f.StringVar(&c.logFormat, "log-format", c.logFormat, "log format, of fencerd's lines and Raft's alike: text (logfmt) or json")
	f.StringVar(&c.configFile, "config", c.configFile, "YAML file of settings whose keys are the flags' names (max-ttl: 1h); flags and FENCER_* variables win over it (see docs/operations.md)")
	f.StringVar(&n.RaftLogLevel, "raft-log-level", n.RaftLogLevel, "level of Raft's own log: trace, debug, info, warn, error, off")
}

// derive fills in what fencerd derives from its flags: the loggers, Join,
// the Raft address beside --listen, the users and their quotas, and TLS.
// It refuses flags that cannot work together, and returns the TLS
// certificates (nil without TLS).
func (c *config) derive(logger *slog.Logger) (*certStore, error) {
	c.node.Logger, c.bridge.Logger = logger, logger
	c.node.Join = len(c.join) > 0
	if c.restore != "" && c.node.Join {
		return nil, errors.New("--restore starts a new cluster: it cannot be combined with --join")
	}
	if c.node.BootstrapExpect > 0 && !c.node.Join {
		return nil, errors.New("--bootstrap-expect needs --join: the client addresses of all the servers expected")
	}
	if c.node.RaftAddr == "" {
		a, err := addrBeside(c.listen, 1, "--raft-listen")
		if err != nil {
			return nil, err
		}
		c.node.RaftAddr = a
	}
	if c.passFile != "" {
		if c.bridge.RequirePass != "" {
			return nil, errors.New("--requirepass and --requirepass-file: set one")
		}
		pass, err := readSecret(c.passFile, "--requirepass-file")
		if err != nil {
			return nil, err
		}
		c.bridge.RequirePass = pass
	}
	if c.usersFile != "" {
		users, err := redisbridge.LoadUsers(c.usersFile)
		if err != nil {
			return nil, err
		}
		c.bridge.Users = users
		for _, u := range users {
			if u.MaxLocks > 0 {
				c.node.Quotas = append(c.node.Quotas, server.Quota{Name: "user " + u.Name, Pattern: u.Pattern, Max: u.MaxLocks})
			}
		}
	}
	if err := checkProtectedMode(c.listen, c.protected, c.bridge); err != nil {
		return nil, err
	}
	certs, err := loadCertStore(c.tls)
	if err != nil {
		return nil, err
	}
	c.bridge.TLS, c.bridge.ForwardTLS = certs.serverConfig(), certs.dialConfig()
	if err := checkUI(c.ui, c.protected, c.bridge, certs); err != nil {
		return nil, err
	}
	if c.node.RaftTLS, err = raftTLSConfig(c.tls, certs); err != nil {
		return nil, err
	}
	return certs, nil
}

// flagOf names the flag that sets each config field a *server.ConfigError
// can name (of server.Config, redisbridge.Config, or fencerd's own checks).
var flagOf = map[string]string{
	"ID": "--id", "BootstrapExpect": "--bootstrap-expect", "DataDir": "--data-dir", "ClientAddr": "--advertise",
	"RaftAddr": "--raft-listen", "RaftAdvertise": "--raft-advertise",
	"MinTTL": "--min-ttl", "MaxTTL": "--max-ttl", "MaxWait": "--max-wait",
	"MaxLocks": "--max-locks", "MaxSessions": "--max-sessions", "MaxSessionLocks": "--max-session-locks", "MaxValueSize": "--max-value-size", "MaxWriteSize": "--max-write-size",
	"MaxBatch": "--max-batch", "Quotas": "--users", "SnapshotThreshold": "--snapshot-threshold",
	"SnapshotInterval": "--snapshot-interval", "TrailingLogs": "--raft-trailing-logs",
	"MemberUnreachableAfter": "--member-unreachable-after", "MemberLagLimit": "--member-lag-limit", "RaftSegmentSize": "--raft-segment-size",
	"RaftLogLevel": "--raft-log-level", "WatchWindow": "--watch-window", "MaxWatches": "--max-watches",

	"RequestTimeout": "--request-timeout", "DefaultLockTTL": "--default-lock-ttl",
	"ScriptTimeLimit": "--script-time-limit", "MaxArgs": "--max-args", "MaxBulkLen": "--max-bulk-len",
	"MaxClients": "--max-clients", "MaxPipeline": "--max-pipeline", "IdleTimeout": "--idle-timeout",
	"Users": "--users", "RequirePass": "--requirepass", "ForwardUser": "--forward-user",
}

// validate checks both configs.
func (c *config) validate() error {
	return withFlagHints(errors.Join(c.node.Validate(), c.bridge.Validate()))
}

// withFlagHints adds the flags that set the fields err names.
func withFlagHints(err error) error {
	var flags []string
	for _, e := range server.ConfigErrors(err) {
		if f, ok := flagOf[e.Field]; ok && !slices.Contains(flags, f) {
			flags = append(flags, f)
		}
	}
	if len(flags) == 0 {
		return err
	}
	return fmt.Errorf("%w\n(set with %s)", err, strings.Join(flags, ", "))
}
