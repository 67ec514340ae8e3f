package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Config configures a Node. Start from DefaultConfig and change what you need;
// Validate names every field that is wrong. A field whose zero value means
// something says so (an empty ID, say); any other field left
// at zero is reported, not replaced by its default.
type Config struct {
	// ID is the node's Raft server ID. Empty means: the ID saved in DataDir,
	// or a new random one saved there on first start.
	ID string
	// DataDir holds the Raft log, stable store, snapshots and the node ID.
	DataDir string
	// RaftAddr is the address the Raft transport listens on.
	RaftAddr string
	// RaftAdvertise is the address other nodes dial; empty means RaftAddr.
	// A host name is kept as a name in the configuration and resolved at
	// every dial (stream.go), so a node that comes back at another IP is
	// still reached.
	// It must not be an unspecified address such as 0.0.0.0.
	RaftAdvertise string
	// ClientAddr is the RESP address clients and other nodes use to reach
	// this node: it is recorded in the cluster's membership, reported by
	// FENCE.LEADER and FENCE.MEMBERS, and followers forward to the leader's.
	// The node itself does not listen on it.
	ClientAddr string
	// Join means: when DataDir holds no Raft state, wait to be added to an
	// existing cluster (Node.Join on its leader) instead of bootstrapping a
	// new one. With existing state it has no effect.
	Join bool
	// CheckJoin, if set, is called with the node's ID when Join is set and
	// the data directory holds no Raft state, before Raft starts: an error
	// stops Open. fencerd asks the cluster's leader whether the ID is still
	// a member (a member whose state was lost must be removed first).
	CheckJoin func(id string) error
	// BootstrapExpect, if above 0, is the number of servers a new cluster
	// forms with (see form.go): a node without Raft state starts Raft with
	// no configuration and is either bootstrapped with the N servers
	// formation found (Node.BootstrapWith) or pulled into a cluster that
	// already names it. It needs Join; CheckJoin is then called as well,
	// and must not wait for a leader. With existing state it has no
	// effect. The default, 0, forms nothing.
	BootstrapExpect int
	// CheckCluster, if set, is called with the ID of the cluster the node
	// belongs to when Join is set, the data directory holds Raft state and
	// the node has recorded its cluster's ID, before Raft starts: an error
	// stops Open. fencerd asks the --join addresses which cluster they
	// belong to, and refuses to start a node whose addresses all name
	// another one.
	CheckCluster func(clusterID string) error
	// Transport, if set, replaces the TCP transport on RaftAddr; tests use
	// raft's in-memory transport. The node closes it if it is io.Closer.
	Transport raft.Transport
	// RaftTLS, if set, runs the Raft transport over mutual TLS (see
	// tlsstream.go): the same config accepts and dials, so it must present
	// a certificate (Certificates or GetCertificate and
	// GetClientCertificate), verify peers (ClientCAs with ClientAuth
	// tls.RequireAndVerifyClientCert, or GetConfigForClient) and trust
	// RootCAs for dialing. Nil, the default, is plain TCP.
	RaftTLS *tls.Config

	// MinTTL and MaxTTL bound the TTLs a client may ask for of a native
	// lease (Acquire, Extend and their kin) and of a session. A Redis
	// value's TTL (Tx.Put) keeps Redis's range instead: shortening a TTL a
	// client asked for would hand its lock on while it still works. The
	// defaults are 100ms and 24h.
	MinTTL, MaxTTL time.Duration
	// DefaultLockTTL is the lease given to a lock taken with no TTL, by a
	// Redis-compatible SETNX or SET NX without PX or EX: Redis would keep
	// such a key forever, fencer never grants an endless lease. It is a
	// lease the node grants, so within MinTTL..MaxTTL. The default is 30s.
	DefaultLockTTL time.Duration
	// MaxWait bounds how long an acquire may queue for a lock. The default
	// is 1h.
	MaxWait time.Duration
	// MaxKeyLen and MaxOwnerLen bound lock names and owner values in bytes.
	// The defaults are 1024 each.
	MaxKeyLen, MaxOwnerLen int
	// MaxLocks bounds the locks held in total: an acquire of a free lock is
	// refused with ErrLimit while the table holds that many. The leader
	// checks before proposing, so concurrent acquires can overshoot it by
	// the number in flight (it is a resource guard, not an invariant). The
	// default is 1000000.
	MaxLocks int
	// MaxSessions bounds the sessions open at once, MaxSessionLocks the
	// locks one session holds; an open or acquire beyond them is refused
	// with ErrLimit. Both are checked before proposing, as MaxLocks is, so
	// they are resource guards, not invariants: acquires in flight, and
	// waits queued before the session reached its limit and handed their
	// lock later, can overshoot them. The defaults are 100000 and 10000.
	MaxSessions, MaxSessionLocks int
	// MaxValueSize bounds one value a Redis-compatible command or script
	// stores (a string, or a whole hash, sorted set or list as encoded), in
	// bytes; at most fsm.MaxValueLen. The default is 512 KiB.
	MaxValueSize int
	// MaxWriteSize bounds what one command or script writes in all (its
	// entry), in bytes; at most fsm.MaxEntrySize. The default is 1 MiB.
	MaxWriteSize int
	// MaxBatch is how many commands the leader may put into one Raft entry
	// (group commit): commands proposed while earlier entries are still
	// being committed wait and go together; 1 turns grouping off, one
	// command per entry. An entry also stays under fsm.MaxEntrySize. The
	// default is 1024.
	MaxBatch int
	// Quotas bound the locks held under lock-name patterns (see Quota);
	// none by default.
	Quotas []Quota
	// WatchWindow is how many of the latest watch events the node keeps in
	// memory, so that a watch resumed from an earlier position (after a
	// reconnect) is sent what it missed rather than a reset. The default
	// is 65536; at most 1<<24.
	WatchWindow int
	// MaxWatches bounds the watches the node serves at once (Node.Watch):
	// one more is refused with ErrLimit. The default is 65536.
	MaxWatches int
	// MaxPrefixWatches bounds the watches of a prefix (Node.WatchPrefix)
	// among them: every event applied is matched against each, so they
	// bound the work a watch adds to applying. The default is 256.
	MaxPrefixWatches int

	// SnapshotThreshold is how many log entries, or commands (an entry may
	// hold a batch of them, see MaxBatch), are written between snapshots;
	// SnapshotInterval is how often Raft and the node check. The defaults are
	// 8192 (Raft's) and 10s (Raft's is 120s): a restart replays the commands
	// since the last snapshot one by one (docs/operations.md has the rate),
	// so the check comes often; a snapshot is taken only past the
	// threshold.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// SnapshotRetain is how many snapshots are kept on disk. The default is 2.
	SnapshotRetain int
	// TrailingLogs is how many log entries are kept behind a snapshot, so
	// that a follower that is a little behind catches up from the log and
	// is not sent the whole table. It bounds the log on disk with
	// SnapshotThreshold. The default is 10240 (Raft's).
	TrailingLogs uint64
	// MemberUnreachableAfter is how long a member may leave the leader's
	// health probe (once a second) unanswered before it is reported
	// unreachable, and unhealthy. The default, 5s, is several missed
	// probes in a row: longer than a pause or a busy second, short
	// enough that an operator sees a stopped node at once.
	MemberUnreachableAfter time.Duration
	// MemberLagLimit is how many entries a member's table may be behind
	// the leader's commit index before it is reported unhealthy; 0, the
	// default, means TrailingLogs: a member further behind than the
	// entries a leader keeps can only catch up with a snapshot.
	MemberLagLimit uint64
	// RaftSegmentSize is the size of the Raft log's segment files
	// (raft-wal's), in bytes. Compaction after a snapshot deletes only
	// whole segments that are no longer the one being written, so a
	// follower whose entries are still in the current segment catches up
	// from the log however far behind it is. Zero means raft-wal's
	// default, 64 MiB; otherwise at least 64 KiB.
	RaftSegmentSize int

	// Logger receives the node's structured logs; nil means slog.Default().
	Logger *slog.Logger
	// RaftLogLevel is the level of Raft's own log lines (hclog names:
	// "trace", "debug", "info", "warn", "error", "off"; empty is hclog's
	// default, "info"). The default is "warn".
	RaftLogLevel string
}

// DefaultConfig returns the configuration fencerd uses without flags.
func DefaultConfig() Config {
	return Config{
		DataDir:           "fencer-data",
		RaftAddr:          "127.0.0.1:7380",
		ClientAddr:        "127.0.0.1:7379",
		MinTTL:            100 * time.Millisecond,
		MaxTTL:            24 * time.Hour,
		DefaultLockTTL:    30 * time.Second,
		MaxWait:           time.Hour,
		MaxKeyLen:         1024,
		MaxOwnerLen:       1024,
		MaxLocks:          1000000,
		MaxSessions:       100000,
		MaxSessionLocks:   10000,
		MaxValueSize:      512 << 10,
		MaxWriteSize:      1 << 20,
		MaxBatch:          1024,
		WatchWindow:       65536,
		MaxWatches:        65536,
		MaxPrefixWatches:  256,
		SnapshotThreshold: 8192,
		SnapshotInterval:  10 * time.Second,
		SnapshotRetain:    2,
		TrailingLogs:      10240,
		RaftLogLevel:      "warn",

		MemberUnreachableAfter: 5 * time.Second,
	}
}

// ConfigError is one invalid field of a Config. Validate reports every
// invalid field, each as a *ConfigError, joined (errors.Join); ConfigErrors
// lists them, so that a command that binds flags to fields can name each
// one's flag (cmd/fencerd). Other packages' configs that fencerd binds
// (redisbridge.Config) report theirs the same way.
type ConfigError struct {
	// Pkg is the package whose config it is: "server", "redisbridge".
	Pkg string
	// Field is the field's name in the Go struct, such as "MaxTTL".
	Field string
	// Reason says what is wrong with the value.
	Reason string
}

func (e *ConfigError) Error() string { return e.Pkg + ": config " + e.Field + ": " + e.Reason }

// ConfigErrors returns every *ConfigError in err's tree, in order.
func ConfigErrors(err error) []*ConfigError {
	var out []*ConfigError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *ConfigError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, u := range e.Unwrap() {
				walk(u)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// Validate reports every invalid field, each as a *ConfigError.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Pkg: "server", Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.DataDir == "" {
		bad("DataDir", "must be set")
	}
	if c.BootstrapExpect < 0 {
		bad("BootstrapExpect", "%d is negative", c.BootstrapExpect)
	} else if c.BootstrapExpect > 0 && !c.Join {
		bad("BootstrapExpect", "needs the addresses of the other servers (Join)")
	}
	if c.ClientAddr == "" {
		bad("ClientAddr", "must be set")
	} else if host, _, err := net.SplitHostPort(c.ClientAddr); err != nil {
		bad("ClientAddr", "%v", err)
	} else if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		bad("ClientAddr", "%q is not an address others can dial", c.ClientAddr)
	}

	// A transport given (tests) replaces the TCP one on RaftAddr.
	if c.Transport == nil {
		if _, _, err := net.SplitHostPort(c.RaftAddr); err != nil {
			bad("RaftAddr", "%v", err)
		}
		adv := c.RaftAdvertise
		if adv == "" {
			adv = c.RaftAddr
		}
		if host, _, err := net.SplitHostPort(adv); err == nil {
			if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
				bad("RaftAdvertise", "%q is not an address other nodes can dial; set RaftAdvertise", adv)
			}
		} else if c.RaftAdvertise != "" {
			bad("RaftAdvertise", "%v", err)
		}
	}
	if c.MinTTL <= 0 {
		bad("MinTTL", "must be positive, got %v", c.MinTTL)
	}
	if c.MaxTTL < c.MinTTL {
		bad("MaxTTL", "%v is below MinTTL %v", c.MaxTTL, c.MinTTL)
	}
	if c.DefaultLockTTL < c.MinTTL || c.DefaultLockTTL > c.MaxTTL {
		bad("DefaultLockTTL", "%v is outside MinTTL %v .. MaxTTL %v", c.DefaultLockTTL, c.MinTTL, c.MaxTTL)
	}
	if c.MaxWait <= 0 {
		bad("MaxWait", "must be positive, got %v", c.MaxWait)
	}
	if c.MaxKeyLen <= 0 || c.MaxKeyLen > fsm.MaxStringLen {
		bad("MaxKeyLen", "must be in 1..%d, got %d", fsm.MaxStringLen, c.MaxKeyLen)
	}
	if c.MaxOwnerLen <= 0 || c.MaxOwnerLen > fsm.MaxStringLen {
		bad("MaxOwnerLen", "must be in 1..%d, got %d", fsm.MaxStringLen, c.MaxOwnerLen)
	}
	if c.MaxBatch <= 0 {
		bad("MaxBatch", "must be positive, got %d", c.MaxBatch)
	}
	if c.MaxValueSize <= 0 || c.MaxValueSize > fsm.MaxValueLen {
		bad("MaxValueSize", "must be in 1..%d, got %d", fsm.MaxValueLen, c.MaxValueSize)
	}
	if c.MaxWriteSize < c.MaxValueSize || c.MaxWriteSize > fsm.MaxEntrySize {
		bad("MaxWriteSize", "must be in MaxValueSize (%d)..%d, got %d", c.MaxValueSize, fsm.MaxEntrySize, c.MaxWriteSize)
	}
	if c.MaxLocks <= 0 {
		bad("MaxLocks", "must be positive, got %d", c.MaxLocks)
	}
	if c.MaxSessions <= 0 {
		bad("MaxSessions", "must be positive, got %d", c.MaxSessions)
	}
	if c.MaxSessionLocks <= 0 {
		bad("MaxSessionLocks", "must be positive, got %d", c.MaxSessionLocks)
	}
	for i, q := range c.Quotas {
		if q.Pattern == "" || q.Max <= 0 {
			bad("Quotas", "quota %d (%s) needs a pattern and a positive Max, got %q and %d", i, q.Name, q.Pattern, q.Max)
		}
	}
	if c.WatchWindow <= 0 || c.WatchWindow > maxWatchWindow {
		bad("WatchWindow", "must be in 1..%d, got %d", maxWatchWindow, c.WatchWindow)
	}
	if c.MaxWatches <= 0 {
		bad("MaxWatches", "must be positive, got %d", c.MaxWatches)
	}
	if c.MaxPrefixWatches <= 0 {
		bad("MaxPrefixWatches", "must be positive, got %d", c.MaxPrefixWatches)
	}
	if c.SnapshotThreshold == 0 {
		bad("SnapshotThreshold", "must be positive")
	}
	if c.SnapshotInterval <= 0 {
		bad("SnapshotInterval", "must be positive")
	}
	if c.SnapshotRetain < 1 {
		bad("SnapshotRetain", "must be at least 1, got %d", c.SnapshotRetain)
	}
	if c.MemberUnreachableAfter < 0 {
		bad("MemberUnreachableAfter", "must not be negative")
	}
	if c.TrailingLogs == 0 {
		bad("TrailingLogs", "must be positive")
	}
	if c.RaftSegmentSize != 0 && (c.RaftSegmentSize < minRaftSegmentSize || c.RaftSegmentSize > maxRaftSegmentSize) {
		bad("RaftSegmentSize", "must be 0 (the default, 64 MiB) or in %d..%d bytes, got %d", minRaftSegmentSize, maxRaftSegmentSize, c.RaftSegmentSize)
	}
	if c.RaftLogLevel != "" && hclog.LevelFromString(c.RaftLogLevel) == hclog.NoLevel {
		bad("RaftLogLevel", "%q is not trace, debug, info, warn, error or off", c.RaftLogLevel)
	}
	return errors.Join(errs...)
}

// The bounds of Config.RaftSegmentSize: a segment smaller than an entry or
// two would rotate on every write; one larger than 1 GiB only delays
// compaction.
const (
	minRaftSegmentSize = 64 << 10
	maxRaftSegmentSize = 1 << 30
)
