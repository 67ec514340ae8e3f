package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Lock clients in other languages, installed and run as the tests go: each
// worker process takes the lock iterations times, writes "enter <who>
// <token>" and "exit <who>" to a shared history file while it holds it, and
// renews the lock once inside.

// rlNodeWorker drives node-redlock (v4 or v5) over ioredis.
const rlNodeWorker = `'use strict';
const fs = require('fs');
const Redis = require('ioredis');
const mod = require('redlock');
const [addrs, key, iterations, out, who, major, startAt, holdMs, ttlMs] = process.argv.slice(2);
const ttl = Number(ttlMs);
const clients = addrs.split(',').map((a) => {
  const [host, port] = a.split(':');
  const c = new Redis({ host, port: Number(port), maxRetriesPerRequest: 1, enableOfflineQueue: false, commandTimeout: 30000 });
  c.on('error', () => {}); // a killed node: its commands fail at once and count as votes against
  return c;
});
// token asks each node in turn (one may have been killed) for value's token.
async function token(key, value) {
  let last;
  for (const c of clients) {
    try { return await c.call('FENCE.TOKEN', key, value); } catch (err) { last = err; }
  }
  throw last;
}
const settings = { retryCount: 20, retryDelay: 100, retryJitter: 50, driftFactor: 0.01 };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// holds reports whether value holds key, asking each node in turn.
async function holds(key, value) {
  return (await token(key, value)) !== null;
}
async function main() {
  const v5 = major === '5';
  const redlock = v5 ? new mod.default(clients, settings) : new mod(clients, settings);
  redlock.on(v5 ? 'error' : 'clientError', () => {});
  // Start together, so that the workers contend.
  await sleep(Math.max(0, Number(startAt) - Date.now()));
  const deadline = Date.now() + 150000;
  for (let i = 0; i < Number(iterations); i++) {
    // Each acquire tries for about 2 s with one value; when it gives up,
    // node-redlock releases what that value may hold (an attempt whose
    // answer was lost in a leader change), and we try again with a new
    // value. A lock whose validity is already gone is given back.
    let lock;
    for (;;) {
      try {
        lock = v5 ? await redlock.acquire([key], ttl) : await redlock.lock(key, ttl);
        if (lock.expiration > Date.now() + 1000) break;
        if (v5) await lock.release().catch(() => {}); else await lock.unlock().catch(() => {});
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
    }
    const tok = await token(key, lock.value);
    if (tok === null) throw new Error('FENCE.TOKEN: ' + lock.value + ' does not hold ' + key);
    fs.appendFileSync(out, 'enter ' + who + ' ' + tok + '\n');
    await sleep(Number(holdMs));
    lock = await lock.extend(ttl);
    const again = await token(key, lock.value);
    if (String(again) !== String(tok)) throw new Error('token changed on extend: ' + tok + ' -> ' + again);
    fs.appendFileSync(out, 'exit ' + who + '\n');
    // A release whose first answer was lost in a leader change is answered
    // 0 when retried (Redis's semantics): the lock is free all the same.
    // STRICT_UNLOCK=1 (no faults): every release must succeed.
    try {
      if (v5) await lock.release(); else await lock.unlock();
    } catch (err) {
      if (process.env.STRICT_UNLOCK === '1' || await holds(key, lock.value)) throw err;
    }
  }
  clients.forEach((c) => c.disconnect());
}
main().then(() => process.exit(0), (err) => { console.error(err && err.stack || err); process.exit(1); });
`

// rlPythonWorker drives redis-py's Lock (Debian's python3-redis).
const rlPythonWorker = `import sys
import time
import redis

addr, key, iterations, out, who, start_at = sys.argv[1:7]
host, port = addr.split(":")
r = redis.Redis(host=host, port=int(port), socket_timeout=30)
lock = r.lock(key, timeout=10, sleep=0.05, blocking_timeout=60)
# Start together, so that the workers contend.
time.sleep(max(0, int(start_at) / 1000 - time.time()))
for i in range(int(iterations)):
    if not lock.acquire():
        sys.exit("could not acquire %s within 60 s" % key)
    token = r.execute_command("FENCE.TOKEN", key, lock.local.token)
    if token is None or not lock.owned():
        sys.exit("FENCE.TOKEN or owned(): the lock is not ours")
    with open(out, "a") as f:
        f.write("enter %s %d\n" % (who, token))
    time.sleep(0.02)
    assert lock.extend(5), "extend"
    assert lock.extend(10, replace_ttl=True), "extend with replace_ttl"
    assert lock.reacquire(), "reacquire"
    assert 5000 < r.pttl(key) <= 10000, r.pttl(key)
    with open(out, "a") as f:
        f.write("exit %s\n" % who)
    lock.release()
`

// rlTools are the installed clients.
type rlTools struct {
	node   string
	python string
	// nodeDirs maps a node-redlock major version to a directory where it
	// and ioredis are installed.
	nodeDirs map[string]string
}

// rlInstall installs node-redlock v4 and v5 with ioredis from the npm
// registry into a temp dir, and checks Debian's python3-redis. A missing
// tool fails the test with what to install: these tests never skip.
func rlInstall(t *testing.T) *rlTools {
	t.Helper()
	tools := &rlTools{nodeDirs: map[string]string{}}
	var err error
	if tools.node, err = exec.LookPath("node"); err != nil {
		t.Fatal("node is not on PATH; the Redlock tests run node-redlock. Install Node.js and npm (Debian: apt-get install nodejs npm)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("npm is not on PATH; the Redlock tests install node-redlock with it (Debian: apt-get install npm)")
	}
	tools.python = "/usr/bin/python3"
	if out, err := exec.Command(tools.python, "-c", "import redis").CombinedOutput(); err != nil {
		t.Fatalf("Debian's python3 cannot import redis (%v: %s); install it: apt-get install python3-redis", err, out)
	}
	for major, pkg := range map[string]string{"4": "redlock@4.2.0", "5": "redlock@5.0.0-beta.2"} {
		dir := filepath.Join(t.TempDir(), "redlock"+major)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"fencer-redlock-test","private":true}`), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(npm, "install", "--no-audit", "--no-fund", "--loglevel=error", pkg, "ioredis@5")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install %s ioredis@5: %v\n%s", pkg, err, out)
		}
		if err := os.WriteFile(filepath.Join(dir, "worker.js"), []byte(rlNodeWorker), 0o644); err != nil {
			t.Fatal(err)
		}
		tools.nodeDirs[major] = dir
	}
	return tools
}

// rlStartAt is when worker processes started now begin, in ms since the
// epoch: late enough for every one of them to have loaded its libraries.
func rlStartAt() string {
	return fmt.Sprint(time.Now().Add(2 * time.Second).UnixMilli())
}

// runNodeRedlock runs procs node-redlock workers on key, each holding the
// lock hold per round with a TTL of ttl, and checks the history they write.
// node-redlock counts a lock's validity from the start of the acquire,
// retries included, so ttl must cover the longest wait for the lock.
func (tools *rlTools) runNodeRedlock(t *testing.T, env *rlEnv, major, key string, procs, iterations int, hold, ttl time.Duration) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "history")
	dir := tools.nodeDirs[major]
	startAt := rlStartAt()
	rlRunWorkers(t, procs, func(i int) *exec.Cmd {
		c := exec.Command(tools.node, "worker.js", strings.Join(env.addrs, ","), key, fmt.Sprint(iterations), out,
			fmt.Sprintf("node%s-%d", major, i), major, startAt, fmt.Sprint(hold.Milliseconds()), fmt.Sprint(ttl.Milliseconds()))
		c.Dir = dir
		return c
	})
	rlCheckHistory(t, rlReadLines(t, out), procs*iterations)
}

// runRedisPy runs procs redis-py workers on key and checks their history.
func (tools *rlTools) runRedisPy(t *testing.T, env *rlEnv, key string, procs, iterations int) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "history")
	script := filepath.Join(dir, "worker.py")
	if err := os.WriteFile(script, []byte(rlPythonWorker), 0o644); err != nil {
		t.Fatal(err)
	}
	startAt := rlStartAt()
	rlRunWorkers(t, procs, func(i int) *exec.Cmd {
		// redis-py's Lock talks to one server: the first address.
		return exec.Command(tools.python, script, env.addrs[0], key, fmt.Sprint(iterations), out, fmt.Sprintf("py-%d", i), startAt)
	})
	rlCheckHistory(t, rlReadLines(t, out), procs*iterations)
}
