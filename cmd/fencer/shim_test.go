package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The shim on its own: what it does when the supervisor is gone (its pipe
// closed), silent (nothing sent), or asks for a signal. The command
// traps SIGTERM and goes on, so that only SIGKILL ends it.
func TestShimStopsTheGroup(t *testing.T) {
	const deaf = `trap 'echo term $(date +%s%N) >> "$LOG"' TERM; while :; do echo tick $(date +%s%N) >> "$LOG"; sleep 0.01; done`
	for _, c := range []struct {
		name         string
		grace, until time.Duration // until: the validity left at the start
		gone         bool          // the supervisor's pipe closes at the start
		signal       syscall.Signal
		script       string
		end          commandEnd
		term         bool          // SIGTERM came
		within       time.Duration // from the start to the end
	}{
		{name: "gone, grace first", grace: 300 * time.Millisecond, until: 5 * time.Second, gone: true,
			script: deaf, end: commandEnd{signal: syscall.SIGKILL}, term: true, within: time.Second},
		{name: "gone, validity first", grace: 2 * time.Second, until: 400 * time.Millisecond, gone: true,
			script: deaf, end: commandEnd{signal: syscall.SIGKILL}, term: true, within: 400 * time.Millisecond},
		{name: "gone, no grace", until: 5 * time.Second, gone: true,
			script: deaf, end: commandEnd{signal: syscall.SIGKILL}, within: 200 * time.Millisecond},
		{name: "silent, killed by the validity", grace: 2 * time.Second, until: 400 * time.Millisecond,
			script: deaf, end: commandEnd{signal: syscall.SIGKILL}, within: 400 * time.Millisecond},
		{name: "asked for a signal", grace: time.Second, until: 5 * time.Second, signal: syscall.SIGUSR1,
			script: `trap 'exit 3' USR1; while :; do sleep 0.02; done`, end: commandEnd{code: 3}, within: time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			cmd := exec.Command("sh", "-c", c.script)
			cmd.Env = append(cmd.Environ(), "LOG="+log)
			msgs := make(chan shimMessage, 1)
			start := time.Now()
			until := monoAt(start.Add(c.until))
			go func() {
				time.Sleep(100 * time.Millisecond) // for the traps
				switch {
				case c.gone:
					close(msgs)
				case c.signal != 0:
					msgs <- shimMessage{signal: c.signal}
				}
			}()
			var status bytes.Buffer
			end := shimSupervise(cmd, nil, c.grace, until, msgs, &status)
			took := time.Since(start)
			if end != c.end {
				t.Fatalf("the command ended %v, want %v", end, c.end)
			}
			// (Loose: the machine may be loaded. What is strict is
			// that the command did nothing after its validity.)
			if took > c.within+time.Second {
				t.Errorf("the command ended %v after the start, want within %v", took, c.within)
			}
			if !strings.HasPrefix(status.String(), "pid ") {
				t.Errorf("status %q, want the command's pid", status.String())
			}
			if c.script != deaf {
				return
			}
			s := stamps(t, log)
			if ticks := s["tick"]; len(ticks) == 0 || ticks[len(ticks)-1] >= start.Add(c.until).UnixNano() {
				t.Errorf("the command wrote after its validity ended (%d writes)", len(ticks))
			}
			if len(s["term"]) > 0 != c.term {
				t.Errorf("SIGTERM came: %v, want %v", !c.term, c.term)
			}
		})
	}
}

// The status pipe's lines read back as they were written.
func TestShimStatusLines(t *testing.T) {
	for _, end := range []commandEnd{{code: 0}, {code: 7}, {signal: syscall.SIGKILL}} {
		pid, got, said := readStatus(strings.NewReader("pid 42\n" + end.String() + "\n"))
		if pid != 42 || !said || got != end {
			t.Errorf("read back %q: pid %d, %v, %v", end, pid, got, said)
		}
	}
	if _, got, said := readStatus(strings.NewReader("failed fork/exec x: permission denied\n")); !said || got.status().(*exitError).code != exitNoExec {
		t.Errorf("failed: %v %v", got, said)
	}
	if _, _, said := readStatus(strings.NewReader("pid 42\n")); said {
		t.Errorf("a shim that died after the start said how the command ended")
	}
}
