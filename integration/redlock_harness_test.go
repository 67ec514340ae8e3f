package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redlock drop-in tests run real, unmodified lock clients (redsync,
// node-redlock, redis-py, redis-cli) against real fencerd processes, in the
// three ways a team may deploy fencer behind them.

// rlTopology is how the client is given fencer.
type rlTopology int

const (
	// rlSingle: one node, its address.
	rlSingle rlTopology = iota
	// rlOneAddress: three nodes, the client given one follower's address
	// (every command is forwarded to the leader).
	rlOneAddress
	// rlEveryAddress: three nodes with --redlock-multi-endpoint, the client
	// given every node's address as if they were independent masters.
	rlEveryAddress
)

func (tp rlTopology) String() string {
	return [...]string{"one-node", "three-nodes-one-address", "three-nodes-every-address"}[tp]
}

const (
	// rlReady bounds forming a cluster or a new election.
	rlReady = 30 * time.Second
	// rlPoll is the pause between polls of a cluster's state.
	rlPoll = 50 * time.Millisecond
	// rlWorkerTimeout bounds one client process (node, python).
	rlWorkerTimeout = 3 * time.Minute
)

// rlEnv is a running deployment and the addresses its clients are given.
type rlEnv struct {
	topo  rlTopology
	nodes []*daemon
	// addrs are what the lock client is configured with.
	addrs []string
}

// rlStart starts a deployment for topo and waits until it serves writes.
func rlStart(t *testing.T, topo rlTopology) *rlEnv {
	t.Helper()
	env := &rlEnv{topo: topo}
	if topo == rlSingle {
		d := startFencerd(t)
		env.nodes = []*daemon{d}
		env.addrs = []string{d.addr}
		env.awaitWrites(t, 0)
		return env
	}
	env.nodes = newDaemons(t, 3)
	for i, d := range env.nodes {
		if i > 0 {
			d.args = append(d.args, "--join", env.nodes[0].addr)
		}
		if topo == rlEveryAddress {
			d.args = append(d.args, "--redlock-multi-endpoint")
		}
	}
	start := time.Now()
	for _, d := range env.nodes {
		d.start(t)
	}
	// Formed: the first node lists three voters with client addresses, and
	// every node names the same leader.
	deadline := time.Now().Add(rlReady)
	for {
		if env.formed() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not form within %v", rlReady)
		}
		time.Sleep(rlPoll)
	}
	leader := env.leader(t, nil)
	for i := range env.nodes {
		env.awaitWrites(t, i)
	}
	if topo == rlOneAddress {
		env.addrs = []string{env.nodes[(leader+1)%3].addr}
	} else {
		for _, d := range env.nodes {
			env.addrs = append(env.addrs, d.addr)
		}
	}
	t.Logf("%v formed in %v; leader is node %d, clients use %v", topo, time.Since(start).Round(time.Millisecond), leader+1, env.addrs)
	return env
}

// rlDo sends one command to addr with a fresh RESP2 connection.
func rlDo(addr string, timeout time.Duration, args ...any) (any, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: timeout, WriteTimeout: timeout})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.Do(ctx, args...).Result()
}

func (env *rlEnv) formed() bool {
	v, err := rlDo(env.nodes[0].addr, 2*time.Second, "FENCE.MEMBERS")
	if err != nil {
		return false
	}
	ms, _ := v.([]any)
	if len(ms) != 3 {
		return false
	}
	for _, m := range ms {
		row, _ := m.([]any)
		if len(row) < 4 || row[2] == "" || row[3] == "nonvoter" {
			return false
		}
	}
	return true
}

// leader returns the index of the node that every live node names as the
// leader, waiting up to rlReady. skip lists dead nodes.
func (env *rlEnv) leader(t *testing.T, skip map[int]bool) int {
	t.Helper()
	i, err := env.awaitLeader(skip)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// awaitLeader is leader for use off the test goroutine.
func (env *rlEnv) awaitLeader(skip map[int]bool) (int, error) {
	deadline := time.Now().Add(rlReady)
	for {
		agreed := ""
		ok := true
		for i, d := range env.nodes {
			if skip[i] {
				continue
			}
			v, err := rlDo(d.addr, 2*time.Second, "FENCE.LEADER")
			row, _ := v.([]any)
			if err != nil || len(row) != 2 || (agreed != "" && row[1] != agreed) {
				ok = false
				break
			}
			agreed, _ = row[1].(string)
		}
		for i, d := range env.nodes {
			if ok && d.addr == agreed && !skip[i] {
				return i, nil
			}
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("the live nodes did not agree on a live leader within %v", rlReady)
		}
		time.Sleep(rlPoll)
	}
}

// awaitWrites waits until a lock can be taken through node i.
func (env *rlEnv) awaitWrites(t *testing.T, i int) {
	t.Helper()
	deadline := time.Now().Add(rlReady)
	key := "rl-ready-" + strconv.Itoa(i)
	for {
		_, err := rlDo(env.nodes[i].addr, 5*time.Second, "FENCE.ACQUIRE", key, "probe", 1000)
		if err == nil {
			_, _ = rlDo(env.nodes[i].addr, 5*time.Second, "FENCE.RELEASE", key, "probe")
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d did not accept a write within %v: %v", i+1, rlReady, err)
		}
		time.Sleep(rlPoll)
	}
}

// rlEvent is one line of a lock history: a holder entering or leaving the
// critical section, with the fencing token it fetched inside.
type rlEvent struct {
	enter bool
	who   string
	token int64
}

// rlCheckHistory checks a history of critical sections written by the
// holders themselves while they held the lock: every enter is followed by
// the same holder's exit before anyone else enters, the tokens grow, and
// there are want sections.
func rlCheckHistory(t *testing.T, lines []string, want int) {
	t.Helper()
	var evs []rlEvent
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "enter":
			tok, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("bad history line %q", l)
			}
			evs = append(evs, rlEvent{enter: true, who: f[1], token: tok})
		case len(f) == 2 && f[0] == "exit":
			evs = append(evs, rlEvent{who: f[1]})
		case len(f) == 0:
		default:
			t.Fatalf("bad history line %q", l)
		}
	}
	var inside *rlEvent
	var lastToken int64
	sections := 0
	for i := range evs {
		e := &evs[i]
		switch {
		case e.enter && inside != nil:
			t.Fatalf("event %d: %s entered while %s held the lock (token %d): mutual exclusion violated", i, e.who, inside.who, inside.token)
		case e.enter && e.token <= lastToken:
			t.Fatalf("event %d: %s got token %d, not above the previous holder's %d", i, e.who, e.token, lastToken)
		case e.enter:
			inside, lastToken = e, e.token
			sections++
		case inside == nil || inside.who != e.who:
			t.Fatalf("event %d: %s left a critical section it was not in", i, e.who)
		default:
			inside = nil
		}
	}
	if inside != nil {
		t.Fatalf("%s never left its critical section", inside.who)
	}
	if sections != want {
		t.Fatalf("%d critical sections, want %d", sections, want)
	}
}

// rlReadLines reads a history file.
func rlReadLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// rlRunWorkers starts n client processes built by cmd(i) and waits for all
// of them, failing the test with their output if one fails. They are
// killed if the test ends first.
func rlRunWorkers(t *testing.T, n int, cmd func(i int) *exec.Cmd) {
	t.Helper()
	type result struct {
		i   int
		out []byte
		err error
	}
	ctx, cancel := context.WithTimeout(context.Background(), rlWorkerTimeout)
	defer cancel()
	results := make(chan result, n)
	for i := range n {
		c := cmd(i)
		full := exec.CommandContext(ctx, c.Path, c.Args[1:]...)
		full.Dir, full.Env = c.Dir, c.Env
		go func() {
			out, err := full.CombinedOutput()
			results <- result{i, out, err}
		}()
	}
	var errs []error
	for range n {
		r := <-results
		if r.err != nil {
			errs = append(errs, fmt.Errorf("worker %d: %v\n%s", r.i, r.err, r.out))
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}
