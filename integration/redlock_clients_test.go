package integration

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// TestRedlockClients runs each real lock client, unmodified, against each
// deployment: one node; three nodes with the client given one follower's
// address; three nodes with --redlock-multi-endpoint and the client given
// every address. Under contention from several goroutines or processes no
// two holders are ever inside at once, and each holder's fencing token is
// larger than the previous holder's.
func TestRedlockClients(t *testing.T) {
	tools := rlInstall(t)
	for _, topo := range []rlTopology{rlSingle, rlOneAddress, rlEveryAddress} {
		t.Run(topo.String(), func(t *testing.T) {
			env := rlStart(t, topo)
			t.Run("redsync", func(t *testing.T) {
				rlRedsyncContention(t, env, "rs-"+topo.String(), 4, 5, nil)
			})
			t.Run("node-redlock-v4", func(t *testing.T) {
				tools.runNodeRedlock(t, env, "4", "nr4-"+topo.String(), 3, 4, 20*time.Millisecond, 30*time.Second)
			})
			t.Run("node-redlock-v5", func(t *testing.T) {
				tools.runNodeRedlock(t, env, "5", "nr5-"+topo.String(), 3, 4, 20*time.Millisecond, 30*time.Second)
			})
			t.Run("redis-py", func(t *testing.T) {
				tools.runRedisPy(t, env, "py-"+topo.String(), 3, 4)
			})
			t.Run("redis-cli", func(t *testing.T) {
				rlRedisCli(t, env, "cli-"+topo.String())
			})
		})
	}
}

// rlRedsyncClients returns one go-redis client per address, with go-redis's
// defaults (RESP3 through HELLO 3, CLIENT SETINFO) except a read timeout
// long enough for a request that is forwarded across an election.
func rlRedsyncClients(t *testing.T, addrs []string) []redsyncredis.Pool {
	t.Helper()
	var pools []redsyncredis.Pool
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, ReadTimeout: 2 * requestTimeout})
		t.Cleanup(func() { _ = c.Close() })
		pools = append(pools, goredis.NewPool(c))
	}
	return pools
}

// rlToken fetches the fencing token of value's grant of key, through the
// first of addrs that answers (a node may have been killed); held is false
// if value does not hold key.
func rlToken(ctx context.Context, addrs []string, key, value string) (tok int64, held bool, err error) {
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, Protocol: 3, MaxRetries: -1, ReadTimeout: 2 * requestTimeout})
		tok, err = c.Do(ctx, "FENCE.TOKEN", key, value).Int64()
		_ = c.Close()
		switch {
		case err == nil:
			return tok, true, nil
		case errors.Is(err, redis.Nil):
			return 0, false, nil
		}
	}
	return 0, false, err
}

// rlRetry retries op, which is safe to repeat, while it fails, up to 20
// times 200 ms apart: an error around a leader change leaves the outcome
// unknown, and the caller checks the outcome afterwards.
func rlRetry(op func() error) error {
	var err error
	for range 20 {
		if err = op(); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// rlRedsyncContention has workers goroutines, each with its own redsync
// instance, take the mutex iterations times: inside, each fetches its
// token, extends the lock once and checks it still holds it. during, if set,
// runs inside worker 0's second critical section (a leader kill).
func rlRedsyncContention(t *testing.T, env *rlEnv, key string, workers, iterations int, during func(value string, token int64) error) {
	t.Helper()
	var (
		mu      sync.Mutex
		history []string
		errs    []error
		wg      sync.WaitGroup
	)
	record := func(line string) {
		mu.Lock()
		history = append(history, line)
		mu.Unlock()
	}
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	expiry := 8 * time.Second
	if during != nil {
		// A holder waits out an election inside: its lease must last.
		expiry = 30 * time.Second
	}
	for w := range workers {
		rs := redsync.New(rlRedsyncClients(t, env.addrs)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := "rs-" + strconv.Itoa(w)
			for i := range iterations {
				m := rs.NewMutex(key, redsync.WithExpiry(expiry), redsync.WithTries(1000),
					redsync.WithRetryDelay(50*time.Millisecond))
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				err := func() error {
					if err := m.LockContext(ctx); err != nil {
						return fmt.Errorf("%s Lock: %w", who, err)
					}
					tok, held, err := rlToken(ctx, env.addrs, key, m.Value())
					if err != nil || !held {
						return fmt.Errorf("%s FENCE.TOKEN: %v, held %v", who, err, held)
					}
					record(fmt.Sprintf("enter %s %d", who, tok))
					time.Sleep(10 * time.Millisecond)
					if during != nil && w == 0 && i == 1 {
						if err := during(m.Value(), tok); err != nil {
							return err
						}
					}
					if err := rlRetry(func() error {
						if ok, err := m.ExtendContext(ctx); !ok {
							return fmt.Errorf("%s Extend: %v %w", who, ok, err)
						}
						return nil
					}); err != nil {
						return err
					}
					if tok2, held, err := rlToken(ctx, env.addrs, key, m.Value()); err != nil || !held || tok2 != tok {
						return fmt.Errorf("%s: token after Extend is %d (held %v, %v), was %d", who, tok2, held, err, tok)
					}
					record("exit " + who)
					// A retried release whose first answer was lost in a
					// leader change finds the lock already free (Redis's
					// semantics): that is a success too.
					return rlRetry(func() error {
						ok, err := m.UnlockContext(ctx)
						if ok {
							return nil
						}
						if _, held, terr := rlToken(ctx, env.addrs, key, m.Value()); terr == nil && !held {
							return nil
						}
						return fmt.Errorf("%s Unlock: %v %w", who, ok, err)
					})
				}()
				cancel()
				if err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	rlCheckHistory(t, history, workers*iterations)
}

// rlRedisCli drives the lock commands with the real redis-cli, in RESP2 and
// (-3) RESP3, through the first address the clients are given.
func rlRedisCli(t *testing.T, env *rlEnv, key string) {
	t.Helper()
	host, port, _ := strings.Cut(env.addrs[0], ":")
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		full := append([]string{"-h", host, "-p", port}, args...)
		out, err := exec.CommandContext(ctx, "redis-cli", full...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimRight(string(out), "\n")
	}
	expect := func(want string, args ...string) {
		t.Helper()
		if got := run(args...); got != want {
			t.Fatalf("redis-cli %s = %q, want %q", strings.Join(args, " "), got, want)
		}
	}
	multi := env.topo == rlEveryAddress
	expect("OK", "SET", key, "me", "NX", "PX", "10000")
	if multi {
		// The same value's acquire through every node succeeds, as a
		// Redlock client given every node needs.
		for _, a := range env.addrs {
			h, p, _ := strings.Cut(a, ":")
			expect("OK", "-h", h, "-p", p, "SET", key, "me", "NX", "PX", "10000")
		}
	} else {
		expect("", "SET", key, "me", "NX", "PX", "10000")
	}
	expect("", "SET", key, "you", "PX", "10000", "NX")
	expect("me", "GET", key)
	expect("1", "EXISTS", key)
	if ms, err := strconv.Atoi(run("PTTL", key)); err != nil || ms <= 0 || ms > 10000 {
		t.Fatalf("PTTL = %d (%v), want 1..10000", ms, err)
	}
	tok, err := strconv.ParseInt(run("FENCE.TOKEN", key, "me"), 10, 64)
	if err != nil || tok <= 0 {
		t.Fatalf("FENCE.TOKEN %s me: %d %v", key, tok, err)
	}
	expect("", "FENCE.TOKEN", key, "you")
	// The release script printed on Redis's distributed-lock page, run by
	// the Lua engine: a stranger's release does nothing.
	release := "if redis.call(\"get\",KEYS[1]) == ARGV[1] then return redis.call(\"del\",KEYS[1]) else return 0 end"
	expect("0", "EVAL", release, "1", key, "you")
	expect("1", "EVAL", redsyncDeleteText, "1", key, "me")
	if multi {
		// A repeated release succeeds; a delayed acquire after it cannot
		// bring the lock back.
		expect("1", "EVAL", redsyncDeleteText, "1", key, "me")
		expect("", "SET", key, "me", "NX", "PX", "10000")
	} else {
		expect("-1", "EVAL", redsyncDeleteText, "1", key, "me")
		expect("OK", "SET", key, "me", "NX", "PX", "10000")
		expect("1", "DEL", key)
	}
	expect("1", "SETNX", key, "again")
	if s, err := strconv.Atoi(run("TTL", key)); err != nil || s < 25 || s > 30 {
		t.Fatalf("TTL after SETNX = %d (%v), want the default lock TTL, 30 s", s, err)
	}
	expect("1", "DEL", key)
	// RESP3: redis-cli -3 sends HELLO 3 first.
	expect("", "-3", "GET", key)
	expect("OK", "-3", "SET", key, "three", "NX", "EX", "10")
	expect("three", "-3", "GET", key)
	if hello := run("-3", "HELLO", "3"); !strings.Contains(hello, "proto 3") || !strings.Contains(hello, "role master") {
		t.Fatalf("HELLO 3 = %q", hello)
	}
}

// redsyncDeleteText is redsync v4.12+'s release script, as redsync sends it.
const redsyncDeleteText = `
	local val = redis.call("GET", KEYS[1])
	if val == ARGV[1] then
		return redis.call("DEL", KEYS[1])
	elseif val == false then
		return -1
	else
		return 0
	end
`

// TestEvalshaAfterLeaderChange: the script cache is each node's own, so a
// new leader has never seen the scripts the clients loaded on the old one.
// Each real client, sent to the new leader, gets NOSCRIPT for its first
// EVALSHA and recovers as it does against a restarted Redis (redsync and
// node-redlock with EVAL, redis-py with SCRIPT LOAD); a client still on the
// old leader, now a follower, has its EVALSHA forwarded as EVAL.
func TestEvalshaAfterLeaderChange(t *testing.T) {
	tools := rlInstall(t)
	env := rlStart(t, rlOneAddress)
	old := env.leader(t, nil)
	onOld := &rlEnv{topo: rlSingle, nodes: env.nodes, addrs: []string{env.nodes[old].addr}}
	rlRedsyncContention(t, onOld, "es-rs", 2, 2, nil)
	tools.runNodeRedlock(t, onOld, "5", "es-nr", 2, 2, 20*time.Millisecond, 30*time.Second)
	tools.runRedisPy(t, onOld, "es-py", 2, 2)

	next := (old + 1) % len(env.nodes)
	nodeIDs := make([]string, len(env.nodes))
	// Hand leadership to next and wait until every node names it.
	deadline := time.Now().Add(rlReady)
	for {
		v, err := rlDo(env.nodes[old].addr, requestTimeout, "FENCE.MEMBERS")
		if err == nil {
			if rows, ok := v.([]any); ok {
				for _, row := range rows {
					if r, ok := row.([]any); ok && len(r) >= 3 && r[2] == env.nodes[next].addr {
						if id, ok := r[0].(string); ok {
							nodeIDs[next] = id
						}
					}
				}
			}
		}
		if nodeIDs[next] != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("FENCE.MEMBERS did not name node %d: %v %v", next+1, v, err)
		}
		time.Sleep(rlPoll)
	}
	if v, err := rlDo(env.nodes[old].addr, requestTimeout, "FENCE.TRANSFER", nodeIDs[next]); err != nil || v != "OK" {
		t.Fatalf("FENCE.TRANSFER: %v %v", v, err)
	}
	if got := env.leader(t, nil); got != next {
		t.Fatalf("leader is node %d, want node %d", got+1, next+1)
	}
	for _, a := range []string{env.nodes[next].addr} {
		if v, err := rlDo(a, requestTimeout, "SCRIPT", "EXISTS", scriptSHA1hex(redsyncDeleteText)); err != nil || fmt.Sprint(v) != "[0]" {
			t.Fatalf("the new leader already has redsync's script (%v, %v): the test would show nothing", v, err)
		}
	}
	onNew := &rlEnv{topo: rlSingle, nodes: env.nodes, addrs: []string{env.nodes[next].addr}}
	rlRedsyncContention(t, onNew, "es-rs2", 2, 2, nil)
	tools.runNodeRedlock(t, onNew, "5", "es-nr2", 2, 2, 20*time.Millisecond, 30*time.Second)
	tools.runRedisPy(t, onNew, "es-py2", 2, 2)
	rlRedsyncContention(t, onOld, "es-rs3", 2, 2, nil)
}

func scriptSHA1hex(text string) string {
	sum := sha1.Sum([]byte(text))
	return hex.EncodeToString(sum[:])
}
