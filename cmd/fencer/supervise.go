package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
	"unsafe"

	"github.com/spf13/cobra"
)

// holding is what a supervised command runs under: a lease (*client.Lease),
// or the leadership of an election, which has the same shape.
//
// Until is the end of its validity as the client counts it, which ends
// before the server's: it moves later on each renewal and never earlier.
// Done is closed when it is known lost (the server said so, or the validity
// ran out), or released.
type holding interface {
	Until() time.Time
	Done() <-chan struct{}
}

// renewable is a holding that can be renewed on demand, as *client.Lease
// can.
type renewable interface {
	holding
	Extend(ctx context.Context) error
}

// freshen renews h before the command starts if it has no more than twice
// grace left: a grant can arrive with much of its validity spent (the
// reply to a wait, or a request held up by an election), and the
// supervisor would otherwise send SIGTERM before the renewal, already due,
// had a chance. A failure is left to the supervisor: a lost holding does
// not start the command, a valid one runs it under the usual rules.
func freshen(ctx context.Context, h renewable, grace time.Duration) {
	left := time.Until(h.Until())
	if left > 2*grace {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	_ = h.Extend(ctx)
}

// forwardedSignals are passed on to the command's process group (Consul's
// `consul lock` passed on too few: hashicorp/consul#797, #1210). SIGQUIT is
// caught too, so that fencer does not die with a goroutine dump and leave
// the command running unsupervised.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGQUIT,
}

// catchSignals starts catching forwardedSignals, for supervisor.run to pass
// on. Call it before taking the lock, so that a signal that arrives between
// the grant and the start of the command is not lost (it is passed on as
// soon as the command runs); call stop when the command has ended.
func catchSignals() (sigs chan os.Signal, stop func()) {
	sigs = make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	return sigs, func() { signal.Stop(sigs) }
}

// supervisor runs a command only while a holding is valid, and makes sure
// that the command, and everything it started, has stopped before the
// validity ends, so that it cannot overlap the next holder (Consul's
// hashicorp/consul#9788: a child killed long after the lock was lost).
//
// The rules:
//   - The command runs in a process group of its own, and every signal goes
//     to the whole group, so that nothing the command started outlives it
//     (hashicorp/consul#2022). A process that leaves the group (setsid,
//     setpgid) escapes; run such a command under a service manager instead.
//   - SIGTERM goes to the group when the validity has grace left without a
//     renewal (the timer re-reads Until when it fires, and sleeps again if a
//     renewal moved it), or at once when the holding is known lost; SIGKILL
//     follows grace after the SIGTERM, or at Until, whichever comes first
//     (aimed a little before Until: killMargin).
//   - forwardedSignals received by fencer are passed on to the group; fencer
//     keeps running until the command exits.
//   - When the command exits, whatever is left of its group is killed
//     (SIGKILL) before run returns, so before the lock is released.
//   - If fencer dies without warning (SIGKILL, the OOM killer), the group
//     still gets SIGTERM at once and SIGKILL grace later or by Until,
//     whichever comes first; and if fencer is stopped (SIGSTOP) or wedged,
//     SIGKILL by Until. The command's parent is a shim (shim.go) that does
//     this when fencer's pipe to it closes, or when the last validity fencer
//     sent it ends. The shim has a process group of its own, out of reach
//     of a kill of fencer's. If the shim is killed too (SIGKILL), the
//     command gets SIGKILL from the kernel (a parent-death signal, Linux
//     only), but processes it started do not.
//
// On a terminal (standard input is a terminal whose foreground is fencer's
// process group) the command's group is made the terminal's foreground
// (SysProcAttr.Foreground), so that it reads the terminal and gets Ctrl-C
// and Ctrl-\ from it directly, while fencer, now in the background, can
// still signal the whole group. fencer and the shim ignore SIGTTOU
// meanwhile, so that a message fencer writes to the terminal, and taking the
// foreground back after the command, do not stop them. Job control is not
// passed through: Ctrl-Z stops the command, not fencer (fencer cannot stop
// with it without losing the lock), so `fg` does not apply; kill -CONT the
// command's group. (A stop sends SIGCONT after SIGTERM, as systemd does, and
// SIGKILL ends a stopped process anyway.)
type supervisor struct {
	hold  holding
	grace time.Duration // between SIGTERM and SIGKILL, at most; see above
	// what names the holding in messages: `the lock "x"`.
	what string
	// cause, if not nil, says why hold ended, for the message.
	cause  func() error
	stderr io.Writer
}

// run starts cmd (not yet started) under s, passes on the signals received
// on sigs (from catchSignals), stops the command as the rules say, waits
// for it, and returns its end as fencer's exit status: nil for 0, else an
// *exitError (128+n if signal n killed it; 126 if it could not start; 125
// if the holding was lost before the command started).
//
// The command runs under the shim (shim.go), which signals its group when
// asked, and stops it by itself if fencer dies.
func (s *supervisor) run(cmd *exec.Cmd, sigs <-chan os.Signal) error {
	select {
	case <-s.hold.Done():
		return &exitError{code: exitLockFail, err: fmt.Errorf("lost %s before the command started%s", s.what, s.because())}
	default:
	}
	shim, ctl, status, err := shimCommand(cmd, s.grace)
	if err != nil {
		return &exitError{code: exitNoExec, err: err}
	}
	defer ctl.Close()
	defer status.Close()
	sent := s.hold.Until()
	send := func(m shimMessage) { _, _ = io.WriteString(ctl, m.String()) }
	send(shimMessage{until: monoAt(sent)})
	// Asked before the start: the shim gives the command the foreground.
	tty, foreground := foregroundTerminal(cmd.Stdin)
	err = shim.Start()
	// The shim's ends are its own now.
	for _, f := range shim.ExtraFiles {
		f.Close()
	}
	if err != nil {
		return &exitError{code: exitNoExec, err: err}
	}
	if foreground {
		// fencer is in the background while the command runs: a message
		// it writes to the terminal must not stop it. After the shim's
		// start, so that the command does not inherit the disposition.
		// The shim takes the foreground back; so does fencer, in case
		// the shim died.
		signal.Ignore(syscall.SIGTTOU)
		defer func() {
			takeForeground(tty, syscall.Getpgrp())
			signal.Reset(syscall.SIGTTOU)
		}()
	}
	group := func(sig syscall.Signal) { send(shimMessage{signal: sig}) }
	exited := make(chan struct{})
	var pgid int
	var end commandEnd
	var said bool
	go func() {
		pgid, end, said = readStatus(status)
		close(exited)
	}()
	// The shim kills the command by the last validity it was sent: it is
	// kept up to date, and a copy late by a refresh only kills earlier.
	refresh := time.NewTicker(validityRefresh)
	defer refresh.Stop()

	lost := s.hold.Done()
	timer := time.NewTimer(time.Until(s.hold.Until().Add(-s.grace)))
	defer timer.Stop()
	stopping, killed := false, false
	// stop sends SIGTERM now and arms SIGKILL.
	stop := func() {
		stopping = true
		killAt := s.hold.Until().Add(-killMargin(s.grace))
		if t := time.Now().Add(s.grace); t.Before(killAt) {
			killAt = t
		}
		if s.grace > 0 {
			group(syscall.SIGTERM)
			// A stopped process (Ctrl-Z, SIGSTOP) handles its
			// SIGTERM only once continued.
			group(syscall.SIGCONT)
		}
		timer.Reset(time.Until(killAt))
	}
	for {
		select {
		case <-exited:
			// The shim has killed whatever the command left in its
			// group, and exits.
			waitErr := shim.Wait()
			if !said {
				// The shim was killed: the kernel killed the command
				// with it, but not what the command started, which
				// keeps its group, and so its id, in use.
				fmt.Fprintf(s.stderr, "fencer: the command's shim ended (%v) before it could say how the command did\n", shim.ProcessState)
				if pgid != 0 {
					_ = syscall.Kill(-pgid, syscall.SIGKILL)
				}
				return endOf(shim, waitErr).status()
			}
			return end.status()
		case <-refresh.C:
			if u := s.hold.Until(); u.After(sent) {
				sent = u
				send(shimMessage{until: monoAt(u)})
			}
		case sig := <-sigs:
			group(sig.(syscall.Signal))
		case <-lost:
			lost = nil
			if !stopping {
				fmt.Fprintf(s.stderr, "fencer: lost %s%s; stopping the command (SIGTERM, then SIGKILL within %v)\n",
					s.what, s.because(), s.killWithin())
				stop()
			}
		case <-timer.C:
			switch {
			case !stopping:
				if left := time.Until(s.hold.Until()); left > s.grace {
					timer.Reset(left - s.grace) // renewed meanwhile
					continue
				}
				fmt.Fprintf(s.stderr, "fencer: could not renew %s, whose validity ends in %v; stopping the command (SIGTERM, then SIGKILL within %v)\n",
					s.what, max(time.Until(s.hold.Until()), 0).Round(time.Millisecond), s.killWithin())
				stop()
			case !killed:
				killed = true
				group(syscall.SIGKILL)
			}
		}
	}
}

// killAhead is the most by which SIGKILL is aimed before Until.
const killAhead = 50 * time.Millisecond

// validityRefresh is how often the shim is sent the validity, if it moved:
// often enough that its copy, which only ever lags, stays far from the
// SIGKILL it would send by it while renewals succeed.
const validityRefresh = 100 * time.Millisecond

// because returns ": <cause>" if the cause of the end is known.
func (s *supervisor) because() string {
	if s.cause == nil {
		return ""
	}
	if err := s.cause(); err != nil {
		return ": " + err.Error()
	}
	return ""
}

// killWithin is the longest time from SIGTERM to SIGKILL, for messages.
func (s *supervisor) killWithin() time.Duration {
	return min(s.grace, max(time.Until(s.hold.Until()), 0)).Round(time.Millisecond)
}

// defaultGrace returns the grace for a TTL when none is given: a third of
// it, the renewal period, so that SIGTERM comes when a renewal due a third
// of the TTL ago has still not succeeded.
func defaultGrace(ttl time.Duration) time.Duration { return ttl / 3 }

// graceFlag sets *grace to its default for ttl unless cmd's --grace was
// given, and checks it.
func graceFlag(cmd *cobra.Command, grace *time.Duration, ttl time.Duration) error {
	if !cmd.Flags().Changed("grace") {
		*grace = defaultGrace(ttl)
	}
	return checkGrace(*grace, ttl)
}

// nameAndCommand checks the arguments of a command that runs another: a
// NAME (whose is what it names) and a COMMAND.
func nameAndCommand(whose string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < 2 || (len(args) == 2 && args[1] == "--") {
			return usage("want %s NAME and a COMMAND to run", whose)
		}
		return nil
	}
}

// commandOf returns the COMMAND and its arguments after NAME (and "--").
func commandOf(args []string) []string {
	argv := args[1:]
	if argv[0] == "--" {
		argv = argv[1:]
	}
	return argv
}

// checkGrace refuses a grace that would leave the command less than half
// of the TTL: a grant that arrives after a wait can have only about half of
// its validity left, and SIGTERM would then come before the first renewal.
func checkGrace(grace, ttl time.Duration) error {
	if grace < 0 || grace > ttl/2 {
		return usage("--grace must be between 0 and half of --ttl (%v), got %v", ttl/2, grace)
	}
	return nil
}

// foregroundTerminal returns r as a terminal if it is one whose foreground
// process group is fencer's own. fencer in the background of its terminal
// (`fencer lock ... &`) must not take the foreground from the shell.
func foregroundTerminal(r io.Reader) (*os.File, bool) {
	f, ok := r.(*os.File)
	if !ok || f == nil || !isTerminal(f) {
		return nil, false
	}
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return nil, false
	}
	return f, int(pgrp) == syscall.Getpgrp()
}

// takeForeground makes the process group pgrp (fencer's) the foreground of
// tty again, as the shell that started fencer left it. SIGTTOU must be
// ignored: the caller is in the background until this returns.
func takeForeground(tty *os.File, pgrp int) {
	id := int32(pgrp)
	for {
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, tty.Fd(), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&id)))
		if errno != syscall.EINTR {
			return
		}
	}
}
