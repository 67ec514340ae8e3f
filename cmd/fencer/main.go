// Command fencer is the command-line client of the fencer lock service:
// take, extend, release and inspect locks, run a command while holding a
// lock (fencer lock), and manage the cluster's members.
//
// The address of the cluster comes from --addr, else from FENCER_ADDR (both
// comma-separated lists of client addresses), else 127.0.0.1:7379. The
// credentials come from --user and --password, else from FENCER_USER and
// FENCER_PASSWORD; --tls and the --tls-* flags connect over TLS.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
)

// Exit codes of fencer itself. fencer lock exits with its command's status
// instead, once the command has run.
const (
	exitOK       = 0
	exitFailure  = 1 // the request failed, the lock is held, the owner does not hold it
	exitUsage    = 2 // bad flags or arguments
	exitLockFail = 125
	exitNoExec   = 126
	exitNotFound = 127
)

// defaultAddr is fencerd's default --listen address.
const defaultAddr = "127.0.0.1:7379"

func main() {
	if isShim(os.Args) {
		os.Exit(runShim(os.Args[2:]))
	}
	// go-redis logs failed dials to the standard logger; fencer reports
	// errors itself.
	redis.SetLogger(quietLogger{})
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// quietLogger discards go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// app is one run of the command: its streams and environment, so that tests
// can run it in-process.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	addrs []string
	// addrSource says where addrs came from, for an error a person reads.
	addrSource string
	timeout    time.Duration
	sec        security
	code       int // exit code set by a command that succeeded but has one of its own
}

// exitError carries an exit code other than exitFailure.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usage marks an error in the command line.
func usage(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// run runs fencer with args and returns its exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return a.code
	}
	var ee *exitError
	code := exitFailure
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case strings.HasPrefix(err.Error(), "unknown command"):
		// cobra's own error for a command line it cannot dispatch.
		code = exitUsage
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(stderr, "fencer:", msg)
	}
	if hint := a.sec.hint(err); hint != "" {
		fmt.Fprintln(stderr, "fencer:", hint)
	}
	if code == exitUsage {
		fmt.Fprintln(stderr, "Run 'fencer --help' for usage.")
	}
	return code
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "fencer",
		Short: "fencer: distributed locks with fencing tokens",
		Long: `fencer takes, extends, releases and inspects locks of a fencer cluster, runs a
command while holding a lock, and manages the cluster's members.

Every grant of a lock comes with a fencing token, larger than every earlier
grant's. Pass it to the storage the lock protects, so that the storage can
refuse writes from a holder whose lease has passed to someone else.

The cluster is reached at --addr, else at $FENCER_ADDR, else at ` + defaultAddr + `;
give several addresses, comma-separated, to survive the loss of a node.

A cluster that requires authentication (fencerd --requirepass or --users)
takes the password from $FENCER_PASSWORD, and the user from $FENCER_USER
(none: the user "default" of --requirepass); --password and --user override
them, but a password on the command line is visible to other users of the
machine (ps). --tls connects over TLS, verifying the nodes' certificates
against the system's CAs or --tls-ca-cert-file; --tls-cert-file and
--tls-key-file present a client certificate (fencerd --tls-auth-clients).

Exit status: 0 on success; 1 if the request failed, the lock is held by another
owner, or the owner does not hold it; 2 for a bad command line. fencer lock
exits with its command's status, or 125 if it could not take the lock, 126 if
the command cannot be run, 127 if it is not found.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolveAddrs(cmd); err != nil {
				return err
			}
			return a.sec.resolve(cmd, a.getenv)
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage("%v", err) })
	f := root.PersistentFlags()
	f.StringSlice("addr", nil, "client addresses of the cluster, comma-separated (default $FENCER_ADDR, else "+defaultAddr+")")
	f.DurationVar(&a.timeout, "timeout", 10*time.Second, "how long a request may take, trying every address, before fencer gives up (waits for a lock excluded)")
	a.sec.addFlags(root)
	root.AddCommand(a.acquireCommand(), a.extendCommand(), a.releaseCommand(), a.statusCommand(),
		a.lockCommand(), a.membersCommand(), a.joinCommand(), a.removeCommand(), a.snapshotCommand(), a.benchCommand(),
		a.leaderCommand(), a.transferCommand(), a.revokeCommand(), a.locksCommand(), a.sessionsCommand(),
		a.electionsCommand(), a.watchCommand())
	root.AddCommand(a.electCommand(), a.versionCommand())
	return root
}

// resolveAddrs applies --addr, FENCER_ADDR and the default, in that order.
func (a *app) resolveAddrs(cmd *cobra.Command) error {
	var addrs []string
	a.addrs = nil
	if cmd.Flags().Changed("addr") {
		addrs, _ = cmd.Flags().GetStringSlice("addr")
		a.addrSource = "from --addr"
	} else if env := a.getenv("FENCER_ADDR"); env != "" {
		addrs = strings.Split(env, ",")
		a.addrSource = "from $FENCER_ADDR"
	} else {
		addrs = []string{defaultAddr}
		a.addrSource = "the default: set the cluster's client addresses with --addr or $FENCER_ADDR"
	}
	for _, s := range addrs {
		if s = strings.TrimSpace(s); s != "" {
			a.addrs = append(a.addrs, s)
		}
	}
	if len(a.addrs) == 0 {
		return usage("no address given")
	}
	if a.timeout <= 0 {
		return usage("--timeout must be positive, got %v", a.timeout)
	}
	return nil
}

// client returns a client of the cluster; close it when done.
func (a *app) client() (*client.Client, error) {
	if err := a.reachable(context.Background()); err != nil {
		return nil, err
	}
	return a.newClient()
}

// newClient returns a client of the cluster without first checking that an
// address answers.
func (a *app) newClient() (*client.Client, error) {
	opts := append([]client.Option{client.WithFailoverTimeout(a.timeout), client.WithRequestTimeout(a.requestTimeout())}, a.sec.options()...)
	c, err := client.New(a.addrs, opts...)
	if err != nil {
		return nil, usage("%v", err)
	}
	return c, nil
}

// requestContext bounds a request that does not wait. The client gives up
// after --timeout of failures; this bound only catches an attempt that
// hangs beyond it.
func (a *app) requestContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), a.requestBound())
}

// requestBound is requestContext's bound.
func (a *app) requestBound() time.Duration { return a.timeout + a.requestTimeout() }

// adminBound bounds a membership change, which may wait for a catch-up.
func (a *app) adminBound() time.Duration { return max(a.timeout, 30*time.Second) }

// withClient runs fn with a new client, closed after it, and cmd's context
// bounded by limit.
func (a *app) withClient(cmd *cobra.Command, limit time.Duration, fn func(context.Context, *client.Client) error) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), limit)
	defer cancel()
	return fn(ctx, c)
}

// requestTimeout bounds one attempt at one node.
func (a *app) requestTimeout() time.Duration {
	return min(a.timeout, 5*time.Second)
}

// args checks the number of positional arguments with a usage error.
func args(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usage("want %s, got %d argument(s)", names, len(args))
		}
		return nil
	}
}
