package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The shim is fencer re-executed as the parent of a supervised command, so
// that the command is stopped in time even if the supervisor (fencer lock,
// fencer elect) dies without warning: SIGKILL and the OOM killer close the
// supervisor's end of the control pipe, and the shim, which sees it close,
// stops the command's group as a lost lease would (SIGTERM, then SIGKILL
// by the validity's end). A parent-death signal alone would not do: it
// goes to the command only, not to its group, is tied to the thread that
// set it, and SIGTERM can be ignored. The shim has a process group of its
// own, so that what kills or stops fencer's group (kill -9 %1 in a shell)
// does not reach it; the command has another.
//
// Only the shim signals the command's group, and it reaps the command only
// after its last signal to the group, so the group's id cannot have been
// reused by then. The supervisor asks for signals over the control pipe;
// it signals the group itself only if the shim died first, when what is
// left of the group keeps its id in use.
//
// The control pipe (the shim's fd 3), from the supervisor, carries lines:
//
//	until <ns>   the validity ends at <ns> on the monotonic clock
//	signal <n>   send signal n to the command's group
//
// The first line is an until, before the command starts. The validity is
// sent as a time on the system's monotonic clock, which the shim, on the
// same machine, reads too: neither wall-clock jumps nor the time a line
// spends in the pipe can move it later.
//
// The status pipe (fd 4), to the supervisor, carries the command's pid
// once it started, then how it ended:
//
//	pid <n>         the command runs as pid n, in group n
//	exit <code>     it exited with code
//	signal <n>      signal n killed it
//	failed <error>  it could not be started
//
// While the supervisor runs, the shim acts on its own only to SIGKILL the
// group by the last validity it was sent, less killMargin: a supervisor that
// is stopped (SIGSTOP) or wedged cannot renew, and its command must not run
// past the validity either.

// shimArg, as fencer's first argument, makes it the shim: fencer
// __supervise GRACE PATH ARGV0 [ARG...]. It is no command of the command
// line (not in --help).
const shimArg = "__supervise"

// isShim reports whether args (os.Args) start the shim.
func isShim(args []string) bool { return len(args) > 1 && args[1] == shimArg }

// shimCommand returns the command that runs cmd (not started) under the
// shim, with grace between its SIGTERM and SIGKILL when the supervisor
// dies, and the control pipe's write end and the status pipe's read end.
// The shim inherits cmd's standard streams, environment and WaitDelay.
func shimCommand(cmd *exec.Cmd, grace time.Duration) (shim *exec.Cmd, ctl, status *os.File, err error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, nil, nil, err
	}
	shim = &exec.Cmd{
		Path:       selfExecutable(),
		Args:       append([]string{os.Args[0], shimArg, grace.String(), cmd.Path}, cmd.Args...),
		Env:        cmd.Env,
		Stdin:      cmd.Stdin,
		Stdout:     cmd.Stdout,
		Stderr:     cmd.Stderr,
		ExtraFiles: []*os.File{ctlR, statusW},
		WaitDelay:  cmd.WaitDelay,
	}
	return shim, ctlW, statusR, nil
}

// monoNow reads the system's monotonic clock, which every process of the
// machine shares.
func monoNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("fencer: reading the monotonic clock: " + err.Error())
	}
	return time.Duration(ts.Nano())
}

// monoAt returns t on the monotonic clock, rounded down: the clock is read
// before the time left until t is.
func monoAt(t time.Time) time.Duration {
	now := monoNow()
	return now + time.Until(t)
}

// killMargin is how much before the validity's end SIGKILL is aimed, so
// that a timer that fires late on a loaded machine still kills by then.
func killMargin(grace time.Duration) time.Duration { return min(grace/4, killAhead) }

// commandEnd is how the command ended, as the shim reports it.
type commandEnd struct {
	code   int            // its exit code, if signal is 0
	signal syscall.Signal // the signal that killed it
	err    error          // it could not be started, or the shim failed
}

// status returns the end as fencer's exit status: nil for 0, else an
// *exitError (128+n if signal n killed the command, 126 if it could not
// start).
func (e commandEnd) status() error {
	switch {
	case e.err != nil:
		return &exitError{code: exitNoExec, err: e.err}
	case e.signal != 0:
		return &exitError{code: 128 + int(e.signal), err: errSilent}
	case e.code != 0:
		// The command has said what it had to say; fencer adds nothing.
		return &exitError{code: e.code, err: errSilent}
	}
	return nil
}

// String is the end's line on the status pipe.
func (e commandEnd) String() string {
	switch {
	case e.err != nil:
		return "failed " + strings.ReplaceAll(e.err.Error(), "\n", " ")
	case e.signal != 0:
		return "signal " + strconv.Itoa(int(e.signal))
	}
	return "exit " + strconv.Itoa(e.code)
}

// readStatus reads the status pipe r: the command's pid (0 if it did not
// start) and how it ended; false if the shim died before it said.
func readStatus(r io.Reader) (pid int, end commandEnd, said bool) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return pid, commandEnd{}, false
		}
		word, arg, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		n, nerr := strconv.Atoi(arg)
		switch {
		case word == "pid" && nerr == nil:
			pid = n
		case word == "failed":
			return pid, commandEnd{err: errors.New(arg)}, true
		case word == "exit" && nerr == nil:
			return pid, commandEnd{code: n}, true
		case word == "signal" && nerr == nil:
			return pid, commandEnd{signal: syscall.Signal(n)}, true
		default:
			return pid, commandEnd{}, false
		}
	}
}

// shimMessage is one line of the control pipe: a validity (until) or a
// signal request.
type shimMessage struct {
	until  time.Duration  // on the monotonic clock, if signal is 0
	signal syscall.Signal // to send to the group
}

// String is the message's line on the control pipe.
func (m shimMessage) String() string {
	if m.signal != 0 {
		return "signal " + strconv.Itoa(int(m.signal)) + "\n"
	}
	return "until " + strconv.FormatInt(int64(m.until), 10) + "\n"
}

// readMessages sends the control pipe's messages to out, and closes it when
// the pipe closes (the supervisor is gone) or says something it cannot
// understand.
func readMessages(r io.Reader, out chan<- shimMessage) {
	defer close(out)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		word, arg, _ := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(arg, 10, 64)
		switch {
		case err != nil:
			return
		case word == "until":
			out <- shimMessage{until: time.Duration(n)}
		case word == "signal":
			out <- shimMessage{signal: syscall.Signal(n)}
		default:
			return
		}
	}
}

// runShim is the shim's main: args are GRACE PATH ARGV0 [ARG...]. It
// returns the shim's exit code, which nobody reads but a person who ran
// it by hand.
func runShim(args []string) int {
	// The parent-death signal of the command (killOnParentDeath) is sent
	// when the thread that started it exits: this one, locked and never
	// unlocked, lives as long as the shim.
	runtime.LockOSThread()
	var grace time.Duration
	var err error
	if len(args) >= 3 {
		grace, err = time.ParseDuration(args[0])
	}
	var st syscall.Stat_t
	if len(args) < 3 || err != nil || syscall.Fstat(3, &st) != nil || syscall.Fstat(4, &st) != nil {
		fmt.Fprintln(os.Stderr, "fencer: "+shimArg+" is run by fencer lock and fencer elect, not by hand")
		return exitUsage
	}
	ctl, status := os.NewFile(3, "control"), os.NewFile(4, "status")
	// Not passed on to the command.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	// A signal sent to every fencer process (pkill -f fencer, a service
	// manager's stop) reaches the shim as well as fencer, which passes it
	// on: the shim must not die of it, nor pass it on twice. Handled (and
	// dropped), not ignored: an ignored signal would stay ignored in the
	// command.
	signal.Notify(make(chan os.Signal, 1), forwardedSignals...)

	msgs := make(chan shimMessage, 1)
	go readMessages(ctl, msgs)
	first, ok := <-msgs
	if !ok || first.signal != 0 {
		return exitFailure // the supervisor died before the start
	}
	cmd := exec.Command(args[1], args[3:]...)
	cmd.Args[0] = args[2]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The shim leaves fencer's process group for one of its own, so that
	// a kill of that group (kill -9 %1 in the shell that started fencer)
	// leaves the shim to stop the command. Whether the command gets the
	// terminal is asked first, from fencer's group.
	var term *terminal
	if tty, ok := foregroundTerminal(cmd.Stdin); ok {
		term = &terminal{tty: tty, home: syscall.Getpgrp()}
	}
	_ = syscall.Setpgid(0, 0)
	end := shimSupervise(cmd, term, grace, first.until, msgs, status)
	if _, err := io.WriteString(status, end.String()+"\n"); err != nil {
		return exitFailure
	}
	return exitOK
}

// terminal is a terminal whose foreground was fencer's process group, home,
// when the shim started.
type terminal struct {
	tty  *os.File
	home int
}

// shimSupervise starts cmd in a process group of its own, passes on the
// supervisor's signal requests to it, stops it when the supervisor dies
// (msgs closes) or when the validity until ends, and returns how it
// ended once it and its group are gone. It writes the command's pid to
// status.
//
// If term is not nil, the command's group becomes its foreground: it reads
// the terminal and gets Ctrl-C from it. The shim gives the foreground back
// to fencer's group when the command is gone, ignoring SIGTTOU, as it is
// in the background; after the start, so that the command does not
// inherit the disposition.
func shimSupervise(cmd *exec.Cmd, term *terminal, grace, until time.Duration, msgs <-chan shimMessage, status io.Writer) commandEnd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if term != nil {
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = int(term.tty.Fd())
	}
	killOnParentDeath(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return commandEnd{err: err}
	}
	if term != nil {
		signal.Ignore(syscall.SIGTTOU)
		defer takeForeground(term.tty, term.home)
	}
	// The group's id is the command's pid, which stays the command's
	// until it is reaped: waitExited does not reap it, cmd.Wait does,
	// after the last signal to the group.
	pgid := cmd.Process.Pid
	group := func(sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }
	_, _ = io.WriteString(status, "pid "+strconv.Itoa(pgid)+"\n")
	exited := make(chan struct{})
	var waitErr error
	waited := false // reaped already: only where waitExited cannot wait
	go func() {
		if !waitExited(pgid) {
			waitErr, waited = cmd.Wait(), true
		}
		close(exited)
	}()

	margin := killMargin(grace)
	kill := time.NewTimer(until - margin - monoNow())
	defer kill.Stop()
	for {
		select {
		case <-exited:
			// Whatever the command left behind in its group must not go
			// on after the lock is released.
			group(syscall.SIGKILL)
			if !waited {
				waitErr = cmd.Wait()
			}
			return endOf(cmd, waitErr)
		case m, ok := <-msgs:
			switch {
			case !ok:
				// The supervisor is gone, and nothing renews the
				// validity: stop as for a lost lease.
				msgs = nil
				if grace > 0 {
					group(syscall.SIGTERM)
					group(syscall.SIGCONT)
				}
				kill.Reset(min(grace, until-margin-monoNow()))
			case m.signal != 0:
				group(m.signal)
			default:
				until = max(until, m.until)
				kill.Reset(until - margin - monoNow())
			}
		case <-kill.C:
			group(syscall.SIGKILL)
		}
	}
}

// endOf returns how cmd, waited for with err, ended.
func endOf(cmd *exec.Cmd, err error) commandEnd {
	st := cmd.ProcessState
	if st == nil {
		return commandEnd{err: err}
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return commandEnd{signal: ws.Signal()}
	}
	return commandEnd{code: st.ExitCode()}
}
