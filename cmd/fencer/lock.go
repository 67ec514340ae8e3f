package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/spf13/cobra"
)

func (a *app) lockCommand() *cobra.Command {
	var ttl, wait, grace, killAfter time.Duration
	var kind lockKind
	cmd := &cobra.Command{
		Use:   "lock NAME [--] COMMAND [ARG...]",
		Short: "Run a command while holding a lock",
		Long: `lock waits until it holds the lock NAME (in line, first come first served),
then runs COMMAND with the lock's fencing token in $FENCER_TOKEN (and the
lock's name in $FENCER_LOCK), renewing the lease while the command runs, and
releases the lock when the command exits. It exits with the command's status.
Pass the token to the storage the command writes to, so that a write that
comes too late is refused.

With --shared, lock takes the read side of the read-write lock NAME: any
number of --shared commands run at once, each with a token of its own, while
none runs with --write, which takes its write side (alone, with a token
larger than every earlier holder's). Waits are first come, first served: a
--shared that arrives behind a waiting --write waits for it. A read-write
lock is a different kind of lock from the plain lock NAME: lock without
these flags on a read-write lock that is held fails (and the other way
round). Fence readers and writers with a read-write validator (docs/fencing.md).

With --permits N, lock takes one of the N permits of the semaphore NAME: up
to N commands run at once. The permit's slot, 0 to N-1, is in $FENCER_SLOT;
fence per (resource, slot). Every holder of a semaphore must give the same N.

--shared, --write and --permits exclude each other.

The command is stopped before the lock can pass to another holder. If the
lease has not been renewed when --grace is left of its validity (as the
client counts it, which ends before the server's), or as soon as it is known
lost (the lock was revoked, or taken away), lock sends the command SIGTERM,
then SIGKILL --grace later or when the validity ends, whichever comes first.
--grace is a third of --ttl unless given; it can be up to half of --ttl.

The command runs in a process group of its own, and these signals go to the
whole group, so that what the command started stops with it; whatever is
left of the group when the command exits is killed before the lock is
released. SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 and SIGQUIT sent to lock
are passed on to the group; lock waits for the command to exit, then
releases the lock. On a terminal the command's group is the terminal's
foreground: it can read the terminal, and Ctrl-C reaches it directly.

The command is stopped in time even if lock dies without warning (SIGKILL,
the OOM killer): the
command's parent is fencer's own shim (fencer re-executed; ps shows it as
"fencer __supervise"), which then sends the group SIGTERM at once, and
SIGKILL --grace later or when the validity ends, whichever comes first; and
which kills the group by the end of the validity if lock is stopped
(SIGSTOP) or hangs and cannot renew. The shim has a process group of its
own, so a kill of lock's group (kill -9 %1) leaves it to do this. The
limits: a process that leaves the command's group (setsid, a daemon that
detaches) escapes; and if the shim itself is killed with SIGKILL as well as
lock, only the command itself is killed (by the kernel, on Linux only), not
what it started.

lock writes nothing to standard output; the command's output is the only
output.

Exit status: the command's (128+n if signal n killed it: 143 after SIGTERM,
137 after SIGKILL); 125 if the lock could not be taken (including --wait
running out); 126 if the command cannot be run; 127 if it is not found.`,
		Example: `  fencer lock build-x -- make release
  fencer lock --ttl 30s --wait 5m nightly -- sh -c 'backup --fencing-token "$FENCER_TOKEN"'
  fencer lock --shared catalog -- ./read-catalog
  fencer lock --write catalog -- ./rebuild-catalog
  fencer lock --permits 3 gpu -- sh -c 'train --device "$FENCER_SLOT"'`,
		Args: nameAndCommand("the lock's"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := kind.check(cmd); err != nil {
				return err
			}
			if err := graceFlag(cmd, &grace, ttl); err != nil {
				return err
			}
			return a.runLocked(cmd.Context(), kind, args[0], commandOf(args), ttl, wait, grace)
		},
	}
	// Everything after NAME belongs to the command, "--" or not.
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "time to live of the lease, renewed about every third of it")
	cmd.Flags().DurationVar(&wait, "wait", 0, "give up (exit status 125) if the lock is not ours within this long (0: wait as long as it takes)")
	cmd.Flags().DurationVar(&grace, "grace", 0, "SIGTERM the command when this much of the lease's validity is left without a renewal, SIGKILL it this long later or at the end of the validity (default a third of --ttl)")
	// --kill-after let the command outlive the lease by up to 10s; the
	// stop is now bounded by the validity, and --grace sets the rest.
	cmd.Flags().BoolVar(&kind.shared, "shared", false, "take the read side of the read-write lock NAME: shared with other --shared holders")
	cmd.Flags().BoolVar(&kind.write, "write", false, "take the write side of the read-write lock NAME: alone, after every reader")
	cmd.Flags().IntVar(&kind.permits, "permits", 0, "take one of the `N` permits of the semaphore NAME; its slot is in $FENCER_SLOT")
	cmd.Flags().DurationVar(&killAfter, "kill-after", 0, "ignored (deprecated): the command is now always killed by the end of the lease's validity; see --grace")
	return cmd
}

// lockKind is the kind of lock fencer lock takes: a plain lock, a side of
// a read-write lock, or a permit of a semaphore.
type lockKind struct {
	shared, write bool
	permits       int // a permit of a semaphore of permits permits if not 0
}

// maxPermits is the server's bound on a semaphore's permits.
const maxPermits = 1024

// check refuses flags that contradict each other.
func (k lockKind) check(cmd *cobra.Command) error {
	var set []string
	for _, f := range []string{"shared", "write", "permits"} {
		if cmd.Flags().Changed(f) {
			set = append(set, "--"+f)
		}
	}
	if len(set) > 1 {
		return usage("%s exclude each other: a lock is either a read-write lock (--shared to read, --write to write) or a semaphore (--permits)", strings.Join(set, " and "))
	}
	if cmd.Flags().Changed("permits") && (k.permits < 1 || k.permits > maxPermits) {
		return usage("--permits %d: a semaphore has 1 to %d permits", k.permits, maxPermits)
	}
	return nil
}

// describe names the lock name of kind k in messages.
func (k lockKind) describe(name string, l *client.Lease) string {
	switch {
	case k.shared:
		return fmt.Sprintf("the read lock %q", name)
	case k.write:
		return fmt.Sprintf("the write lock %q", name)
	case k.permits > 0:
		return fmt.Sprintf("permit %d of the semaphore %q", l.Slot(), name)
	}
	return fmt.Sprintf("the lock %q", name)
}

// runLocked takes the lock, runs argv under it and returns the command's
// exit status as an *exitError (or nil for 0).
func (a *app) runLocked(ctx context.Context, kind lockKind, name string, argv []string, ttl, wait, grace time.Duration) error {
	return a.runUnder(ctx, argv, grace, func(c *client.Client) (held, error) {
		lease, err := a.lockLease(ctx, c, kind, name, ttl, wait)
		if err != nil {
			return held{}, err
		}
		env := []string{"FENCER_TOKEN=" + strconv.FormatUint(lease.Token(), 10), "FENCER_LOCK=" + name}
		if kind.permits > 0 {
			env = append(env, "FENCER_SLOT="+strconv.Itoa(lease.Slot()))
		}
		return held{hold: lease, env: env, what: kind.describe(name, lease), cause: lease.Err, giveUp: func() { a.release(lease) }}, nil
	})
}

// held is what runUnder runs a command under: a lock's lease or an
// election's term.
type held struct {
	hold renewable
	// env is added to the command's environment (FENCER_TOKEN, ...).
	env []string
	// what names it in messages; cause says why it ended.
	what  string
	cause func() error
	// giveUp releases it once the command ended.
	giveUp func()
}

// runUnder runs argv under what take obtains (with the client), and
// returns the command's exit status as an *exitError (or nil for 0). A
// command that cannot run fails before take; signals are caught from
// before take on, so that none is lost between the grant and the start of
// the command; what take obtained is renewed first if it is short of time,
// and given up after the command.
func (a *app) runUnder(ctx context.Context, argv []string, grace time.Duration, take func(c *client.Client) (held, error)) error {
	path, err := lookCommand(argv[0])
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return lockFailure(err)
	}
	defer c.Close()

	sigs, stopSignals := catchSignals()
	defer stopSignals()
	h, err := take(c)
	if err != nil {
		return &exitError{code: exitLockFail, err: err}
	}
	defer h.giveUp()
	freshen(ctx, h.hold, grace)

	child := exec.Command(path, argv[1:]...)
	child.Args[0] = argv[0]
	child.Env = append(os.Environ(), h.env...)
	child.Stdin, child.Stdout, child.Stderr = a.stdin, a.stdout, a.stderr
	// Output still held open by the command's own children after it exits
	// does not hold up fencer for long.
	child.WaitDelay = time.Second
	s := &supervisor{hold: h.hold, grace: grace, what: h.what, cause: h.cause, stderr: a.stderr}
	return s.run(child, sigs)
}

// lookCommand finds the command to run, or returns the exit status for one
// that cannot be run (126) or is not found (127).
func lookCommand(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		code := exitNoExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return "", &exitError{code: code, err: err}
	}
	return path, nil
}

// lockLease waits for the lock; SIGINT, SIGTERM and SIGHUP stop the wait.
func (a *app) lockLease(ctx context.Context, c *client.Client, kind lockKind, name string, ttl, wait time.Duration) (*client.Lease, error) {
	ctx, stop := signalContext(ctx)
	defer stop()
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	opts := []client.LeaseOption{client.WithTTL(ttl), client.WithAutoRenew()}
	switch {
	case kind.shared:
		return c.NewRWMutex(name, opts...).RLock(ctx)
	case kind.write:
		return c.NewRWMutex(name, opts...).Lock(ctx)
	case kind.permits > 0:
		return c.NewSemaphore(name, kind.permits, opts...).Acquire(ctx)
	}
	return c.Acquire(ctx, name, opts...)
}

// release releases the lease after the command ended. A failure is only
// reported: the lock expires after its TTL anyway. A lost lease is released
// too (the server may have renewed it after all, with the reply lost), but
// briefly: the cluster was likely out of reach.
//
// A lease still valid gets until its validity ends (at least a second):
// the command may have been stopped because renewals failed, and after the
// validity the lock expires anyway.
func (a *app) release(l *client.Lease) {
	lostBefore := l.Err() != nil && !errors.Is(l.Err(), client.ErrReleased)
	timeout := min(a.timeout, max(time.Until(l.Until()), time.Second))
	if lostBefore {
		timeout = min(timeout, time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := l.Release(ctx); err != nil && !lostBefore {
		fmt.Fprintf(a.stderr, "fencer: releasing %q: %v (it expires after its TTL)\n", l.Name(), err)
	}
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
