// Command fencerd is the fencer server: a Raft-replicated lock service that
// speaks RESP. With no flags it serves a one-node cluster on 127.0.0.1:7379,
// keeping its state in ./fencer-data.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/fencerlock/fencer/internal/version"
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

func newCommand() *cobra.Command {
	c := defaultConfig()
	cmd := &cobra.Command{
		Use:   "fencerd",
		Short: "fencer server: Raft-replicated locks with fencing tokens, over RESP",
		Long: `fencerd serves fencer's lock service. With no flags it starts (or restarts)
a one-node cluster on 127.0.0.1:7379 with its state in ./fencer-data.

Every flag can also be set by an environment variable, FENCER_ and the
flag's name in capitals with '_' for '-' (--max-ttl: FENCER_MAX_TTL), or by
a key of the YAML file --config names (or FENCER_CONFIG): the flag's name
without its dashes (max-ttl: 1h). A flag on the command line wins over the
environment, which wins over the file, which wins over the default.

Try it with redis-cli:
  redis-cli -p 7379 FENCE.ACQUIRE mylock me 10000`,
		Version:      version.Get().String(),
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applySources(cmd.Flags(), os.LookupEnv); err != nil {
				return err
			}
			return run(cmd.Context(), c)
		},
	}
	cmd.SetVersionTemplate("fencerd {{.Version}}\n")
	cmd.SetFlagErrorFunc(suggestOnUnknownFlag)
	c.bindFlags(cmd)
	return cmd
}

// run serves until SIGINT or SIGTERM, or until the RESP server fails. Each
// step that opens something pushes its closing onto one cleanup, which runs
// once, in reverse order, whether a step fails or fencerd shuts down.
func run(ctx context.Context, c *config) error {
	logger, err := newLogger(os.Stderr, c.logLevel, c.logFormat)
	if err != nil {
		return err
	}
	certs, err := c.derive(logger)
	if err != nil {
		return err
	}
	var cl cleanup
	defer cl.run()
	ctx = handleSignals(ctx, certs, logger, &cl)
	cl.push(watchCertFiles(certs, c.tls.reloadEvery, logger))
	ln, httpLn, err := listen(c, logger, &cl)
	if err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	// Health checks answer while the node opens: a node that is to join
	// waits for its seed there, and must not be restarted as dead.
	var ep endpoints
	if srv := serveHTTP(httpLn, &ep, logger, c.pprof); srv != nil {
		cl.push(func() { _ = srv.Close() })
	}
	node, err := openNode(ctx, c, logger, &cl)
	if err != nil {
		return err
	}
	ep.opened(node.HTTPHandler())
	serveErr, err := startBridge(node, c.bridge, ln, &cl)
	if err != nil {
		return err
	}
	logger.Info("fencerd serving", "version", version.Version, "commit", version.Get().ShortRevision(), "id", node.ID(), "listen", ln.Addr().String(), "raft", node.RaftAddr(), "data_dir", c.node.DataDir)
	joinCluster(ctx, c, node, logger)
	formErr := formCluster(ctx, c, node, logger)
	recordAddress(ctx, c, node, logger)
	err = waitForStop(ctx, serveErr, formErr, node.Stopped(), logger)
	cl.run()
	logger.Info("stopped")
	return err
}

// cleanup closes what run opened: the functions pushed, last first, once.
type cleanup struct{ fns []func() }

func (cl *cleanup) push(f func()) { cl.fns = append(cl.fns, f) }

func (cl *cleanup) run() {
	for i := len(cl.fns) - 1; i >= 0; i-- {
		cl.fns[i]()
	}
	cl.fns = nil
}

// newLogger returns fencerd's logger, writing to w at --log-level in
// --log-format. Raft's lines go through it too (server.Config.Logger).
func newLogger(w io.Writer, levelName, format string) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// handleSignals returns ctx, cancelled by SIGINT or SIGTERM, and reloads
// the certificates on SIGHUP until cl runs.
func handleSignals(ctx context.Context, certs *certStore, logger *slog.Logger, cl *cleanup) context.Context {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	cl.push(stop)
	cl.push(reloadOnSIGHUP(certs, logger))
	return ctx
}

// listen opens the RESP listener and the HTTP one (nil when there is
// none). Listening comes first so that a port in use is reported before
// Raft touches the data, and so that the bound address (port 0 resolved)
// is what others are told, unless --advertise says otherwise.
func listen(c *config, logger *slog.Logger, cl *cleanup) (net.Listener, net.Listener, error) {
	// Locals, not named results: the clean-up closures must keep the
	// listeners that an error return would set to nil.
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	cl.push(func() { _ = ln.Close() })
	if c.node.ClientAddr == "" {
		c.node.ClientAddr = ln.Addr().String()
	}
	httpLn, err := listenHTTP(c.httpListen, c.listen, logger)
	if err != nil {
		return nil, nil, err
	}
	if httpLn != nil {
		cl.push(func() { _ = httpLn.Close() })
	}
	return ln, httpLn, nil
}

// openNode opens the node and, with --restore, seeds its new cluster. A
// node with no Raft state that is to join asks the cluster's leader first
// whether its ID is still a member: a member whose state was lost must be
// removed before it joins again.
func openNode(ctx context.Context, c *config, logger *slog.Logger, cl *cleanup) (*server.Node, error) {
	var snapshot []byte
	if c.restore != "" {
		var err error
		if snapshot, err = readSnapshot(c.restore); err != nil {
			return nil, err
		}
	}
	j := newJoiner(c, logger)
	c.node.CheckJoin = func(id string) error { return j.checkNotMember(ctx, id) }
	if c.node.BootstrapExpect > 0 {
		c.node.CheckJoin = checkFormation(ctx, c, logger)
	}
	c.node.CheckCluster = func(own string) error { return j.checkCluster(ctx, own) }
	node, err := server.Open(c.node)
	if err != nil {
		return nil, err
	}
	cl.push(func() {
		if err := node.Close(); err != nil && !errors.Is(err, context.Canceled) {
			logger.Warn("closing node", "err", err)
		}
	})
	if snapshot != nil {
		if err := restoreSnapshot(ctx, node, snapshot, logger); err != nil {
			return nil, err
		}
	}
	return node, nil
}

// startBridge serves RESP on ln; Serve's error goes to the channel.
func startBridge(node *server.Node, bcfg redisbridge.Config, ln net.Listener, cl *cleanup) (<-chan error, error) {
	bridge, err := redisbridge.New(node, bcfg)
	if err != nil {
		return nil, err
	}
	cl.push(func() { _ = bridge.Close() })
	serveErr := make(chan error, 1)
	go func() { serveErr <- bridge.Serve(ln) }()
	return serveErr, nil
}

// joinCluster asks the members of --join, in the background, to add a
// node that has no Raft state yet.
func joinCluster(ctx context.Context, c *config, node *server.Node, logger *slog.Logger) {
	if !node.NeedsJoin() || c.node.BootstrapExpect > 0 {
		return // (formCluster joins)
	}
	j := newJoiner(c, logger)
	go func() {
		if err := j.join(ctx, node.ID(), node.RaftAddr(), c.node.ClientAddr); err != nil {
			logger.Warn("gave up joining", "err", err)
		}
	}()
}

// waitForStop returns when ctx ends (a signal: nil), the RESP server
// stops (its error), formation finds the node must not run (its error) or
// the node stopped applying a format it cannot read (its error, which
// names the levels).
func waitForStop(ctx context.Context, serveErr, formErr, stopped <-chan error, logger *slog.Logger) error {
	select {
	case err := <-stopped:
		logger.Error("stopping", "err", err)
		return err
	case err := <-formErr:
		logger.Error("stopping", "err", err)
		return err
	case <-ctx.Done():
		logger.Info("shutting down")
		return nil
	case err := <-serveErr:
		logger.Error("RESP server stopped", "err", err)
		return err
	}
}

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

// checkProtectedMode refuses, as Redis's protected mode does, to serve
// without authentication on an address other hosts can reach.
func checkProtectedMode(listen string, protected bool, bcfg redisbridge.Config) error {
	if !protected || bcfg.RequirePass != "" || len(bcfg.Users) > 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen %s is not a loopback address and no password is set: refusing to serve without authentication (protected mode); set --requirepass or --users, or --protected-mode=false", listen)
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
