package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/spf13/cobra"
)

func (a *app) lockCommand() *cobra.Command {
	var ttl, wait, killAfter time.Duration
	cmd := &cobra.Command{
		Use:   "lock NAME [--] COMMAND [ARG...]",
		Short: "Run a command while holding a lock",
		Long: `lock waits until it holds the lock NAME (in line, first come first served),
then runs COMMAND with the lock's fencing token in $FENCER_TOKEN (and the
lock's name in $FENCER_LOCK), renewing the lease while the command runs, and
releases the lock when the command exits. It exits with the command's status.

If the lease is lost (the cluster cannot be reached for longer than the
lease's validity, or the lock was taken away), lock sends the command SIGTERM,
then SIGKILL after --kill-after, and exits with the command's status. Pass the
token to the storage the command writes to, so that a write that comes too
late is refused.

lock writes nothing to standard output; the command's output is the only
output. SIGINT, SIGTERM and SIGHUP are passed on to the command. When
standard input is not a terminal, the command runs in a process group of its
own, and signals (and the SIGTERM and SIGKILL of a lost lease) go to the
whole group; on a terminal it stays in the foreground, Ctrl-C reaches it
directly, and only the command itself is signalled.

Exit status: the command's (128+n if signal n killed it); 125 if the lock
could not be taken (including --wait running out); 126 if the command cannot
be run; 127 if it is not found.`,
		Example: `  fencer lock build-x -- make release
  fencer lock --ttl 30s --wait 5m nightly -- sh -c 'backup --fencing-token "$FENCER_TOKEN"'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 || (len(args) == 2 && args[1] == "--") {
				return usage("want the lock's NAME and a COMMAND to run")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			argv := args[1:]
			if argv[0] == "--" {
				argv = argv[1:]
			}
			return a.runLocked(cmd.Context(), args[0], argv, ttl, wait, killAfter)
		},
	}
	// Everything after NAME belongs to the command, "--" or not.
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "time to live of the lease, renewed about every third of it")
	cmd.Flags().DurationVar(&wait, "wait", 0, "give up (exit status 125) if the lock is not ours within this long (0: wait as long as it takes)")
	cmd.Flags().DurationVar(&killAfter, "kill-after", 10*time.Second, "after a lost lease, how long the command has between SIGTERM and SIGKILL")
	return cmd
}

// runLocked takes the lock, runs argv under it and returns the command's
// exit status as an *exitError (or nil for 0).
func (a *app) runLocked(ctx context.Context, name string, argv []string, ttl, wait, killAfter time.Duration) error {
	// A command that cannot run fails before the lock is taken.
	path, err := exec.LookPath(argv[0])
	if err != nil {
		code := exitNoExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return &exitError{code: code, err: err}
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()

	lease, err := a.lockLease(ctx, c, name, ttl, wait)
	if err != nil {
		return &exitError{code: exitLockFail, err: err}
	}
	defer a.release(lease)

	child := exec.Command(path, argv[1:]...)
	child.Args[0] = argv[0]
	child.Env = append(os.Environ(), "FENCER_TOKEN="+strconv.FormatUint(lease.Token(), 10), "FENCER_LOCK="+name)
	child.Stdin, child.Stdout, child.Stderr = a.stdin, a.stdout, a.stderr
	// Output still held open by the command's own children after it exits
	// does not hold up fencer for long.
	child.WaitDelay = time.Second
	// Without a terminal, the command gets a process group of its own, so
	// that stopping it stops everything it started. On a terminal it stays
	// in fencer's group, the terminal's foreground, so that it can read the
	// terminal and gets Ctrl-C from it directly.
	group := !isTerminal(a.stdin)
	if group {
		child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	signalChild := func(s syscall.Signal) {
		if group {
			_ = syscall.Kill(-child.Process.Pid, s)
		} else {
			_ = child.Process.Signal(s)
		}
	}
	// Signals are caught before the command starts, so none is lost.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := child.Start(); err != nil {
		return &exitError{code: exitNoExec, err: err}
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	lost := lease.Done()
	var kill <-chan time.Time
	for {
		select {
		case err := <-exited:
			if lost == nil && group {
				// The lease is gone: nothing the command started may
				// go on writing.
				signalChild(syscall.SIGKILL)
			}
			return exitStatus(child, err)
		case s := <-sigs:
			if s == syscall.SIGINT && !group {
				continue // the terminal sent it to the command too
			}
			signalChild(s.(syscall.Signal))
		case <-lost:
			lost = nil
			fmt.Fprintf(a.stderr, "fencer: lost the lock %q: %v; stopping the command (SIGTERM, then SIGKILL after %v)\n",
				name, lease.Err(), killAfter)
			signalChild(syscall.SIGTERM)
			kill = time.After(killAfter)
		case <-kill:
			signalChild(syscall.SIGKILL)
		}
	}
}

// lockLease waits for the lock; SIGINT, SIGTERM and SIGHUP stop the wait.
func (a *app) lockLease(ctx context.Context, c *client.Client, name string, ttl, wait time.Duration) (*client.Lease, error) {
	ctx, stop := signalContext(ctx)
	defer stop()
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	return c.Acquire(ctx, name, client.WithTTL(ttl), client.WithAutoRenew())
}

// release releases the lease after the command ended. A failure is only
// reported: the lock expires after its TTL anyway. A lost lease is released
// too (the server may have renewed it after all, with the reply lost), but
// briefly: the cluster was likely out of reach.
func (a *app) release(l *client.Lease) {
	lostBefore := l.Err() != nil && !errors.Is(l.Err(), client.ErrReleased)
	timeout := a.timeout
	if lostBefore {
		timeout = min(timeout, time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := l.Release(ctx); err != nil && !lostBefore {
		fmt.Fprintf(a.stderr, "fencer: releasing %q: %v (it expires after its TTL)\n", l.Name(), err)
	}
}

// exitStatus turns the command's end into fencer's exit status.
func exitStatus(child *exec.Cmd, err error) error {
	st := child.ProcessState
	if st == nil {
		return &exitError{code: exitNoExec, err: err}
	}
	code := st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	if code == 0 {
		return nil
	}
	// The command has said what it had to say; fencer adds nothing.
	return &exitError{code: code, err: errSilent}
}

// errSilent is an error run does not print.
var errSilent = errors.New("")

// signalContext is ctx, cancelled by SIGINT, SIGTERM or SIGHUP.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
}

// contextTimeout is context.WithTimeout.
func contextTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
