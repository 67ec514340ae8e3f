package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLockLibraries runs more real lock libraries, unmodified, against
// fencer: seven from npm (versions pinned by each driver's package-lock.json)
// and four from Debian's PHP packages. Each driver (written for these tests,
// in testdata/locklibs) takes a lock, extends it where the library can,
// shows a second acquirer refused while it is held, releases it, and shows
// the second acquirer then gets it; it exits 0 when every step behaved. They
// run against one node, against three nodes through a follower (every
// command forwarded to the leader), and against three nodes run with
// --redlock-multi-endpoint (through one of them: the drivers take one
// address). redsync, node-redlock and redis-py have
// tests of their own (TestRedlockClients).
func TestLockLibraries(t *testing.T) {
	libs := locklibsPrepare(t)
	for _, topo := range []rlTopology{rlSingle, rlOneAddress, rlEveryAddress} {
		t.Run(topo.String(), func(t *testing.T) {
			env := rlStart(t, topo)
			for _, lib := range libs {
				t.Run(lib.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					cmd := exec.CommandContext(ctx, lib.run[0], lib.run[1:]...)
					cmd.Dir = lib.dir
					cmd.Env = append(os.Environ(), "REDIS_ADDR="+env.addrs[0])
					out, err := cmd.CombinedOutput()
					if err != nil || !strings.Contains(string(out), "PASS") {
						t.Fatalf("%s against %v: %v\n%s", lib.name, env.addrs[0], err, out)
					}
					t.Logf("%s: %d steps checked", lib.name, strings.Count(string(out), "\nok: ")+1)
				})
			}
		})
	}
}

// lockLib is one library's driver, ready to run.
type lockLib struct {
	name string
	dir  string
	run  []string
}

// locklibsPrepare installs the npm drivers' packages (npm ci, in parallel,
// in a temp copy of each) and checks that PHP and the Debian packages of the
// PHP libraries are there. A missing tool fails the test with what to
// install: these tests never skip.
func locklibsPrepare(t *testing.T) []lockLib {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH; these tests run lock libraries from npm (Debian: apt-get install nodejs npm)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("npm is not on PATH (Debian: apt-get install npm)")
	}
	php, err := exec.LookPath("php")
	if err != nil {
		t.Fatal("php is not on PATH; these tests run PHP lock libraries (Debian: apt-get install php-cli php-redis php-predis php-symfony-lock php-symfony-semaphore php-malkusch-lock php-illuminate-cache php-illuminate-redis)")
	}
	for _, p := range []string{"php-redis", "php-predis", "php-symfony-lock", "php-symfony-semaphore", "php-malkusch-lock", "php-illuminate-cache", "php-illuminate-redis"} {
		if out, err := exec.Command("dpkg", "-s", p).CombinedOutput(); err != nil || !strings.Contains(string(out), "Status: install ok installed") {
			t.Fatalf("the Debian package %s is not installed; these tests run the PHP lock libraries (apt-get install %s)", p, p)
		}
	}
	src, err := filepath.Abs(filepath.Join("testdata", "locklibs"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	var libs []lockLib
	var wg sync.WaitGroup
	errs := make(chan string, len(entries))
	for _, e := range entries {
		name, dir := e.Name(), filepath.Join(src, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "driver.php")); err == nil {
			libs = append(libs, lockLib{name: name, dir: dir, run: []string{php, "driver.php"}})
			continue
		}
		work := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(work, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"driver.mjs", "package.json", "package-lock.json"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		libs = append(libs, lockLib{name: name, dir: work, run: []string{node, "driver.mjs"}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
			cmd.Dir = work
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- name + ": npm ci: " + err.Error() + "\n" + string(out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if t.Failed() {
		t.FailNow()
	}
	return libs
}
