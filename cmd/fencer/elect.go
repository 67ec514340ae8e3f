package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/spf13/cobra"
)

func (a *app) electCommand() *cobra.Command {
	var value string
	var ttl, wait, grace time.Duration
	cmd := &cobra.Command{
		Use:   "elect NAME [--] COMMAND [ARG...]",
		Short: "Run a command while leading an election",
		Long: `elect campaigns in the election NAME (in line, first come first served) and,
once elected, runs COMMAND with the leader's epoch in $FENCER_EPOCH (and the
election's name in $FENCER_ELECTION), keeping the leadership's session alive
while the command runs; when the command exits it resigns, so that the next
campaigner is elected. It exits with the command's status. Epochs grow from
one leader to the next: pass the epoch to the storage the command writes to,
so that a deposed leader's late write is refused.

The command is stopped before leadership can pass to another campaigner, as
fencer lock stops its command: if the session has not been kept alive when
--grace is left of its validity (as the client counts it, which ends before
the server's), or as soon as leadership is known lost (the session ended on
the server: expired, or revoked), elect sends the command's process group
SIGTERM, then SIGKILL --grace later or when the validity ends, whichever
comes first. --grace is a third of --ttl unless given; it can be up to half
of --ttl.

The command runs in a process group of its own, and these signals go to the
whole group; whatever is left of the group when the command exits is killed
before elect resigns. SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 and SIGQUIT
sent to elect are passed on to the group; elect waits for the command to
exit, then resigns. SIGINT, SIGTERM and SIGHUP while elect is still
campaigning end the campaign (exit status 125).

The command is stopped in time even if elect dies without warning (SIGKILL,
the OOM killer), with the limits fencer lock --help lists: the command's parent is fencer's
own shim, which then stops the group as when leadership is lost (SIGTERM,
then SIGKILL --grace later or by the end of the validity).

elect writes nothing to standard output; the command's output is the only
output.

Exit status: the command's (128+n if signal n killed it: 143 after SIGTERM,
137 after SIGKILL); 125 if this process was not elected (including --wait
running out); 126 if the command cannot be run; 127 if it is not found.`,
		Example: `  fencer elect --value "$(hostname)" db-writer -- ./writer
  fencer elect --ttl 5s --wait 1m cron-leader -- sh -c 'run-jobs --fencing-token "$FENCER_EPOCH"'`,
		Args: nameAndCommand("the election's"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := graceFlag(cmd, &grace, ttl); err != nil {
				return err
			}
			if !cmd.Flags().Changed("value") {
				value = defaultElectValue()
			}
			return a.runElected(cmd.Context(), args[0], value, commandOf(args), ttl, wait, grace)
		},
	}
	// Everything after NAME belongs to the command, "--" or not.
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&value, "value", "", "the value announced as the leader's, which FENCE.HOLDER shows (default HOST/PID: the host name and fencer's process ID)")
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "time to live of the leadership's session, kept alive about every third of it")
	cmd.Flags().DurationVar(&wait, "wait", 0, "give up (exit status 125) if not elected within this long (0: wait as long as it takes)")
	cmd.Flags().DurationVar(&grace, "grace", 0, "SIGTERM the command when this much of the session's validity is left without a keepalive, SIGKILL it this long later or at the end of the validity (default a third of --ttl)")
	return cmd
}

// defaultElectValue says who leads: the host name and this process's ID.
func defaultElectValue() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + "/" + strconv.Itoa(os.Getpid())
}

// runElected campaigns, runs argv while leading and returns the command's
// exit status as an *exitError (or nil for 0).
func (a *app) runElected(ctx context.Context, name, value string, argv []string, ttl, wait, grace time.Duration) error {
	// A command that cannot run fails before the campaign.
	path, err := lookCommand(argv[0])
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return lockFailure(err)
	}
	defer c.Close()

	// Caught from now on, so that none is lost between the election and
	// the start of the command.
	sigs, stopSignals := catchSignals()
	defer stopSignals()
	lead, err := a.campaign(ctx, c, name, value, ttl, wait)
	if err != nil {
		return &exitError{code: exitLockFail, err: err}
	}
	defer a.resign(lead)
	freshen(ctx, lead, grace)

	child := exec.Command(path, argv[1:]...)
	child.Args[0] = argv[0]
	child.Env = append(os.Environ(), "FENCER_EPOCH="+strconv.FormatUint(lead.epoch, 10), "FENCER_ELECTION="+name)
	child.Stdin, child.Stdout, child.Stderr = a.stdin, a.stdout, a.stderr
	// Output still held open by the command's own children after it exits
	// does not hold up fencer for long.
	child.WaitDelay = time.Second
	s := &supervisor{hold: lead, grace: grace, what: fmt.Sprintf("the leadership of %q", name), cause: lead.Err, stderr: a.stderr}
	return s.run(child, sigs)
}

// leadership is one term of an election as the supervisor sees it: it is
// valid as long as the session it leads under (Until, Extend: the session's
// validity and keepalive), and ends with the term (Done: the session ended
// or was lost, a resignation, or the election's lock taken away, which the
// session's next keepalive reports).
type leadership struct {
	session  *client.Session
	election *client.Election
	epoch    uint64
	// term ends with the client's term (and so with the session), or when
	// resign ends it.
	term   context.Context
	cancel context.CancelCauseFunc
}

func (l *leadership) Until() time.Time      { return l.session.Until() }
func (l *leadership) Done() <-chan struct{} { return l.term.Done() }
func (l *leadership) Extend(ctx context.Context) error {
	if err := l.session.KeepAlive(ctx); err != nil {
		return err
	}
	return l.Err() // the keepalive ends the term if the lock was taken
}

// Err returns nil while the term lasts, then why it ended.
func (l *leadership) Err() error {
	if l.term.Err() == nil {
		return nil
	}
	return context.Cause(l.term)
}

// campaign opens a session and campaigns in the election name under it
// until elected; SIGINT, SIGTERM and SIGHUP stop the campaign, and so does
// wait, if not 0, running out. A failed campaign closes its session, which
// also takes this campaigner out of the election's line on the server.
func (a *app) campaign(ctx context.Context, c *client.Client, name, value string, ttl, wait time.Duration) (*leadership, error) {
	ctx, stop := signalContext(ctx)
	defer stop()
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	s, err := c.NewSession(ctx, client.WithSessionTTL(ttl))
	if err != nil {
		return nil, err
	}
	e := c.NewElection(s, name)
	epoch, err := e.Campaign(ctx, value)
	var term context.Context
	if err == nil {
		if term = e.Context(); term.Err() != nil {
			// Elected, and the term over before it could start.
			err = fmt.Errorf("lost the leadership of %q as soon as elected: %w", name, s.Err())
		}
	}
	if err != nil {
		a.closeSession(s, false)
		return nil, err
	}
	l := &leadership{session: s, election: e, epoch: epoch}
	l.term, l.cancel = context.WithCancelCause(term)
	return l, nil
}

// resign gives up leadership after the command ended, so that the next
// campaigner is elected at once, then closes the session. A failure is only
// reported: the session expires after its TTL anyway, and with it the
// leadership. Leadership already lost is not resigned (the session may
// still be open on the server, if it ran out on the client only: closing
// it is enough), and the close is brief: the cluster was likely out of
// reach.
//
// A term still valid gets until its validity ends (at least a second), as
// fencer lock's release does.
func (a *app) resign(l *leadership) {
	lostBefore := l.Err() != nil
	defer l.cancel(nil)
	if !lostBefore {
		timeout := min(a.timeout, max(time.Until(l.Until()), time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := l.election.Resign(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(a.stderr, "fencer: resigning from %q: %v (the leadership ends when its session does)\n", l.election.Name(), err)
		}
	}
	a.closeSession(l.session, lostBefore)
}

// closeSession closes s, bounded as resign is; a failure is reported unless
// s was lost already.
func (a *app) closeSession(s *client.Session, lostBefore bool) {
	lostBefore = lostBefore || s.Err() != nil
	timeout := min(a.timeout, max(time.Until(s.Until()), time.Second))
	if lostBefore {
		timeout = min(timeout, time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.Close(ctx); err != nil && !lostBefore {
		fmt.Fprintf(a.stderr, "fencer: closing session %d: %v (it expires after its TTL)\n", s.ID(), err)
	}
}
