//go:build fencer_pyrust

package integration

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/redistest"
)

// The Python and Rust lock libraries, run unchanged (make test-pyrust-libs;
// the build tag keeps their installs out of go test ./...). Each library's
// driver (integration/pylibs/driver.py, integration/rustlibs/src/main.rs)
// checks the library's own answers and mutual exclusion; these tests run it
// against a real redis-server (the control: a driver that fails there is
// wrong), a one-node fencerd, and a follower of a three-node cluster
// started without --redlock-multi-endpoint, and hold a lock through it
// across a kill -9 of the leader. make check runs one leader kill per
// language; with FENCER_LIBS_FULL=1 (make test-pyrust-libs-full, in make
// check-full) every library gets one, and the Redlock-style libraries are
// also given every address: of three redis-servers (one of them shut down
// while a lock is held, as the control of a leader kill), and of a cluster
// started with --redlock-multi-endpoint (with a leader kill); and the
// libraries whose client can speak RESP3 run with it doing so, against
// redis-server and through a follower.

// pyLibraries are the driver's library names; redlock marks those given
// every address.
var pyLibraries = []pyrustLib{
	{name: "redis-py", resp3: true}, {name: "redis-py-asyncio", resp3: true},
	{name: "pottery-redlock", redlock: true, resp3: true}, {name: "pottery-aioredlock", redlock: true, resp3: true},
	{name: "aioredlock", redlock: true}, {name: "python-redis-lock", resp3: true},
	{name: "redlock-py", redlock: true, resp3: true}, {name: "sherlock", resp3: true}, {name: "tooz"},
}

var rustLibraries = []pyrustLib{{name: "rslock", redlock: true, resp3: true}, {name: "redis-rs", resp3: true}}

// pyrustLib is one library of a driver.
type pyrustLib struct {
	name    string
	redlock bool
	// resp3: the library's client can be made to speak RESP3
	// (LOCK_PROTOCOL=3; redis-py's protocol=3, redis-rs's protocol=resp3).
	resp3 bool
}

// pyrustKillOne is the library per language whose leader kill make check
// runs.
var pyrustKillOne = map[string]bool{"redis-py": true, "rslock": true}

// pyrustDriver runs a driver: args before the library and mode.
type pyrustDriver struct {
	argv []string
	dir  string
}

func (d pyrustDriver) cmd(ctx context.Context, lib, mode string, addrs []string, env ...string) *exec.Cmd {
	argv := append(append([]string{}, d.argv...), lib, mode)
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Dir = d.dir
	c.Env = append(os.Environ(), "LOCK_ADDRS="+strings.Join(addrs, ","), "LOCK_KEY=pyrust-"+lib+"-"+mode)
	c.Env = append(c.Env, env...)
	return c
}

func TestPythonLockLibraries(t *testing.T) {
	pyrustMatrix(t, pyPrepare(t), pyLibraries)
}

func TestRustLockLibraries(t *testing.T) {
	pyrustMatrix(t, rustPrepare(t), rustLibraries)
}

// pyrustFull says whether to run the full matrix.
func pyrustFull() bool { return os.Getenv("FENCER_LIBS_FULL") == "1" }

func pyrustMatrix(t *testing.T, d pyrustDriver, libs []pyrustLib) {
	t.Run("redis", func(t *testing.T) {
		r := redistest.Start(t)
		for _, lib := range libs {
			t.Run(lib.name, func(t *testing.T) { pyrustBasic(t, d, lib.name, []string{r.Addr}) })
		}
	})
	t.Run(rlSingle.String(), func(t *testing.T) {
		env := rlStart(t, rlSingle)
		for _, lib := range libs {
			t.Run(lib.name, func(t *testing.T) { pyrustBasic(t, d, lib.name, env.addrs) })
		}
	})
	t.Run(rlOneAddress.String(), func(t *testing.T) {
		env := rlStart(t, rlOneAddress)
		for _, lib := range libs {
			t.Run(lib.name, func(t *testing.T) { pyrustBasic(t, d, lib.name, env.addrs) })
		}
		killed := false
		for _, lib := range libs {
			if !pyrustFull() && !pyrustKillOne[lib.name] {
				continue
			}
			if killed {
				pyrustRestartKilled(t, env)
			}
			killed = true
			t.Run("leader-kill/"+lib.name, func(t *testing.T) { pyrustLeaderKill(t, env, d, lib.name, false) })
		}
	})
	if !pyrustFull() {
		return
	}
	t.Run("redis-resp3", func(t *testing.T) {
		r := redistest.Start(t)
		for _, lib := range libs {
			if lib.resp3 {
				t.Run(lib.name, func(t *testing.T) { pyrustBasic(t, d, lib.name, []string{r.Addr}, "LOCK_PROTOCOL=3") })
			}
		}
	})
	t.Run(rlOneAddress.String()+"-resp3", func(t *testing.T) {
		env := rlStart(t, rlOneAddress)
		for _, lib := range libs {
			if lib.resp3 {
				t.Run(lib.name, func(t *testing.T) { pyrustBasic(t, d, lib.name, env.addrs, "LOCK_PROTOCOL=3") })
			}
		}
	})
	t.Run("redis-every-address", func(t *testing.T) {
		var addrs []string
		for _, r := range redistest.StartN(t, 3) {
			addrs = append(addrs, r.Addr)
		}
		for _, lib := range libs {
			if lib.redlock {
				t.Run(lib.name, func(t *testing.T) { pyrustBasic(t, d, lib.name, addrs) })
			}
		}
		for _, lib := range libs {
			if lib.redlock {
				t.Run("master-kill/"+lib.name, func(t *testing.T) { pyrustRedisKill(t, d, lib.name) })
			}
		}
	})
	t.Run(rlEveryAddress.String(), func(t *testing.T) {
		env := rlStart(t, rlEveryAddress)
		for _, lib := range libs {
			if lib.redlock {
				t.Run(lib.name, func(t *testing.T) { pyrustBasic(t, d, lib.name, env.addrs) })
			}
		}
		killed := false
		for _, lib := range libs {
			if !lib.redlock {
				continue
			}
			if killed {
				pyrustRestartKilled(t, env)
			}
			killed = true
			t.Run("leader-kill/"+lib.name, func(t *testing.T) { pyrustLeaderKill(t, env, d, lib.name, true) })
		}
	})
}

// pyrustBasic runs the driver's basic scenario against addrs, with env
// added to its environment.
func pyrustBasic(t *testing.T, d pyrustDriver, lib string, addrs []string, env ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := d.cmd(ctx, lib, "basic", addrs, env...).CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "PASS") {
		t.Fatalf("%s against %v: %v\n%s", lib, addrs, err, out)
	}
	t.Logf("%s: %d steps checked", lib, strings.Count(string(out), "ok: "))
}

// pyrustLeaderKill has the driver hold a lock through a follower (every
// node, if every), kills the leader with SIGKILL and waits for a new one
// (pyrustHold).
func pyrustLeaderKill(t *testing.T, env *rlEnv, d pyrustDriver, lib string, every bool) {
	leader := env.leader(t, nil)
	addrs := []string{env.nodes[(leader+1)%3].addr}
	if every {
		addrs = env.addrs
	}
	pyrustHold(t, d, lib, addrs, func() {
		start := time.Now()
		env.nodes[leader].kill9(t)
		next, err := env.awaitLeader(map[int]bool{leader: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("killed node %d (the leader) while %s held its lock through %v; node %d leads %v later",
			leader+1, lib, addrs, next+1, time.Since(start).Round(time.Millisecond))
	})
}

// pyrustRedisKill is the control of a leader kill for a Redlock given
// every address: the driver holds a lock on three redis-servers and one
// of them is shut down (SHUTDOWN NOSAVE: the process exits, as a killed
// master would).
func pyrustRedisKill(t *testing.T, d pyrustDriver, lib string) {
	servers := redistest.StartN(t, 3)
	var addrs []string
	for _, r := range servers {
		addrs = append(addrs, r.Addr)
	}
	pyrustHold(t, d, lib, addrs, func() {
		_, _ = rlDo(servers[0].Addr, requestTimeout, "SHUTDOWN", "NOSAVE")
		if err := pingOnce(servers[0].Addr); err == nil {
			t.Fatalf("redis-server %s still answers after SHUTDOWN NOSAVE", servers[0].Addr)
		}
		t.Logf("shut down redis-server %s while %s held its lock on %v", servers[0].Addr, lib, addrs)
	})
}

// pyrustHold runs the driver's hold scenario against addrs: once it holds
// the lock, kill runs (a leader kill), and the driver checks that the lock
// is still its holder's and its waiter still waits, then that the waiter
// gets it once released.
func pyrustHold(t *testing.T, d pyrustDriver, lib string, addrs []string, kill func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := d.cmd(ctx, lib, "hold", addrs)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	var out strings.Builder
	held := make(chan bool, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if sc.Text() == "held" && !sent {
				sent = true
				held <- true
			}
		}
		if !sent {
			held <- false
		}
	}()
	finish := func() string {
		<-done
		return out.String()
	}
	if !<-held {
		err := <-exited
		t.Fatalf("%s never held the lock: %v\n%s", lib, err, finish())
	}
	kill()
	if _, err := io.WriteString(stdin, "killed\n"); err != nil {
		t.Fatalf("telling %s the leader was killed: %v\n%s", lib, err, finish())
	}
	err = <-exited
	text := finish()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(text), "PASS") {
		t.Fatalf("%s across a leader kill: %v\n%s", lib, err, text)
	}
	t.Logf("%s across the kill:\n%s", lib, text)
}

// pyrustRestartKilled restarts the node a leader kill left dead, and waits
// until a write goes through every node, so that the next kill finds three.
func pyrustRestartKilled(t *testing.T, env *rlEnv) {
	t.Helper()
	for _, d := range env.nodes {
		if d.proc.done() {
			d.restart(t)
		}
	}
	deadline := time.Now().Add(rlReady)
	for i, d := range env.nodes {
		for {
			v, err := rlDo(d.addr, 5*time.Second, "SET", fmt.Sprintf("pyrust-ready-%d-%d", i, d.starts), "x", "PX", 1000)
			if err == nil && v == "OK" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d did not take a write within %v of the restart: %v %v", i+1, rlReady, v, err)
			}
			time.Sleep(rlPoll)
		}
	}
}

// pyLibsPython is the interpreter the venv is made with: Debian's, which
// scripts/deps.sh installs (python3, python3-venv), so that the venv is
// the same on every machine the project runs on.
const pyLibsPython = "/usr/bin/python3"

// pyPrepare makes (once per requirements file and interpreter version) a
// venv outside the clone, in ~/.cache/fencer-pylibs/<hash>, with the
// libraries integration/pylibs/requirements.txt pins, and returns the
// driver run by its python.
func pyPrepare(t *testing.T) pyrustDriver {
	t.Helper()
	if _, err := os.Stat(pyLibsPython); err != nil {
		t.Fatalf("%s is missing; these tests run Python lock libraries in a venv made with it (Debian: apt-get install python3 python3-venv)", pyLibsPython)
	}
	src, err := filepath.Abs("pylibs")
	if err != nil {
		t.Fatal(err)
	}
	req, err := os.ReadFile(filepath.Join(src, "requirements.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ver, err := exec.Command(pyLibsPython, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", pyLibsPython, err, ver)
	}
	sum := sha256.Sum256(append(append([]byte{}, ver...), req...))
	cache := filepath.Join(pyrustCacheDir(t), "fencer-pylibs")
	venv := filepath.Join(cache, hex.EncodeToString(sum[:8]))
	stamp := filepath.Join(venv, "fencer-installed")
	python := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(stamp); err == nil {
		return pyrustDriver{argv: []string{python, "driver.py"}, dir: src}
	}
	start := time.Now()
	if err := os.RemoveAll(venv); err != nil {
		t.Fatal(err)
	}
	pyrustRun(t, "", pyLibsPython, "-m", "venv", venv)
	pyrustRun(t, "", python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
		"--cache-dir", filepath.Join(cache, "pip"), "-r", filepath.Join(src, "requirements.txt"))
	if err := os.WriteFile(stamp, req, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("made the venv %s in %v", venv, time.Since(start).Round(time.Millisecond))
	return pyrustDriver{argv: []string{python, "driver.py"}, dir: src}
}

// rustPrepare builds integration/rustlibs with cargo, at the versions its
// Cargo.lock pins, into ~/.cache/fencer-rustlibs/target (outside the
// clone): offline once the crates are in cargo's cache, fetching them
// first otherwise.
func rustPrepare(t *testing.T) pyrustDriver {
	t.Helper()
	cargo, err := exec.LookPath("cargo")
	if err != nil {
		home, _ := os.UserHomeDir()
		if _, err2 := os.Stat(filepath.Join(home, ".cargo", "bin", "cargo")); err2 != nil {
			t.Fatal("cargo is not on PATH or in ~/.cargo/bin; these tests build the Rust lock libraries with it (Rust 1.88 or later: rustup)")
		}
		cargo = filepath.Join(home, ".cargo", "bin", "cargo")
	}
	src, err := filepath.Abs("rustlibs")
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(pyrustCacheDir(t), "fencer-rustlibs", "target")
	manifest := filepath.Join(src, "Cargo.toml")
	start := time.Now()
	build := []string{"build", "--quiet", "--locked", "--offline", "--manifest-path", manifest, "--target-dir", target}
	if out, err := exec.Command(cargo, build...).CombinedOutput(); err != nil {
		t.Logf("an offline build failed, so fetching the crates first: %v\n%s", err, out)
		pyrustRun(t, "", cargo, "fetch", "--locked", "--manifest-path", manifest)
		pyrustRun(t, "", cargo, build...)
	}
	t.Logf("cargo build in %v", time.Since(start).Round(time.Millisecond))
	return pyrustDriver{argv: []string{filepath.Join(target, "debug", "fencer-rustlibs")}, dir: src}
}

// pyrustCacheDir is ~/.cache (XDG_CACHE_HOME if set).
func pyrustCacheDir(t *testing.T) string {
	t.Helper()
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// pyrustRun runs a setup command and fails the test with its output if it
// fails.
func pyrustRun(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	c := exec.Command(name, args...)
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
