//go:build linux

package chaos

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencerlock/fencer/internal/lazyfs"
)

const (
	// formTimeout bounds forming a cluster, and re-forming it after a fault
	// is healed: restarts, elections, joins, followers catching up.
	formTimeout = 60 * time.Second
	// adminTimeout bounds one administrative request (LEADER, MEMBERS,
	// STATEHASH, REMOVE, TRANSFER).
	adminTimeout = 5 * time.Second
	// serverRequestTimeout is the --request-timeout every node runs with.
	serverRequestTimeout = 3 * time.Second
	// pollEvery is the pause between polls of the cluster's state.
	pollEvery = 100 * time.Millisecond
	// snapshotThreshold and snapshotInterval make every node snapshot every
	// few seconds under the workloads' load. Raft keeps 10240 entries after
	// a snapshot, so once a run is past that many, a node that joins again
	// with an empty data directory catches up through InstallSnapshot.
	snapshotThreshold = "1024"
	snapshotInterval  = "2s"
)

// clusterConfig says how to run a cluster.
type clusterConfig struct {
	nodes int
	bin   string
	env   []string // extra environment for fencerd (FENCER_FAULTS)
	dir   string   // where data and logs go
	// nodeEnv is extra environment for single nodes, by index, after env
	// (FENCER_CLOCK_RATE for one node).
	nodeEnv [][]string
	// lazy puts each node's data directory on a lazyfs mount, which can
	// lose what was not fsynced (power cuts); seed picks its torn pages.
	lazy bool
	seed uint64
	// args are extra fencerd flags for every node.
	args []string
}

// cluster is n fencerd processes, each in its own namespace of one network.
type cluster struct {
	cfg   clusterConfig
	nw    *network
	nodes []*node

	teardownOnce sync.Once
}

// live holds the clusters that still run, for the signal handler.
var live struct {
	sync.Mutex
	clusters map[*cluster]bool
}

// startCluster creates the network and starts the nodes: n1 bootstraps, the
// others join through every node before them. It returns once every node
// lists all members and names the same leader. On error it tears down
// whatever it started.
func startCluster(cfg clusterConfig) (_ *cluster, err error) {
	nw, err := newNetwork(cfg.nodes)
	if err != nil {
		return nil, err
	}
	c := &cluster{cfg: cfg, nw: nw}
	live.Lock()
	if live.clusters == nil {
		live.clusters = make(map[*cluster]bool)
	}
	live.clusters[c] = true
	live.Unlock()
	defer func() {
		if err != nil {
			c.teardown()
		}
	}()
	var joins []string
	for i := range cfg.nodes {
		env := cfg.env
		if i < len(cfg.nodeEnv) {
			env = append(slices.Clip(cfg.env), cfg.nodeEnv[i]...)
		}
		n := &node{
			idx: i, id: fmt.Sprintf("n%d", i+1), ns: nw.nodes[i], ip: nodeIP(i),
			dir: filepath.Join(cfg.dir, fmt.Sprintf("n%d", i+1)),
			bin: cfg.bin, env: env, nw: nw,
		}
		n.dataDir = filepath.Join(n.dir, "data")
		if err := os.MkdirAll(n.dataDir, 0o755); err != nil {
			return nil, err
		}
		if cfg.lazy {
			disk, err := lazyfs.Mount(n.dataDir, filepath.Join(n.dir, "disk"), lazyfs.Options{Torn: true, Seed: cfg.seed + uint64(i), RealSync: true})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", n.id, err)
			}
			n.disk = disk
		}
		c.nodes = append(c.nodes, n)
		n.args = []string{
			"--id", n.id,
			"--data-dir", n.dataDir,
			"--listen", n.addr(),
			// Namespace addresses are not loopback; the campaign runs
			// without a password.
			"--protected-mode=false",
			"--raft-listen", net.JoinHostPort(n.ip, raftPort),
			"--request-timeout", serverRequestTimeout.String(),
			"--snapshot-threshold", snapshotThreshold,
			"--snapshot-interval", snapshotInterval,
			"--log-level", "info",
			"--raft-log-level", "info",
		}
		n.args = append(n.args, cfg.args...)
		if len(joins) > 0 {
			n.args = append(n.args, "--join", strings.Join(joins, ","))
		}
		joins = append(joins, n.addr())
	}
	begin := time.Now()
	for i, n := range c.nodes {
		if err := n.start(); err != nil {
			return nil, err
		}
		for i == 0 {
			// n1 leads its one-node cluster before the others join.
			if l, err := c.leaderSeenBy(0); err == nil && l == 0 {
				break
			}
			if time.Since(begin) > formTimeout {
				return nil, fmt.Errorf("n1 did not lead its one-node cluster within %v", formTimeout)
			}
			time.Sleep(pollEvery)
		}
	}
	if err := c.awaitMembers(formTimeout); err != nil {
		return nil, err
	}
	return c, nil
}

// teardown stops every process and deletes the network. It is safe to call
// more than once and from a signal handler.
func (c *cluster) teardown() {
	c.teardownOnce.Do(func() {
		var wg sync.WaitGroup
		for _, n := range c.nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.stop()
			}()
		}
		wg.Wait()
		for _, n := range c.nodes {
			if n.disk != nil {
				if err := n.disk.Unmount(); err != nil {
					fmt.Fprintf(os.Stderr, "chaos: unmounting %s: %v\n", n.dataDir, err)
				}
			}
		}
		if err := c.nw.teardown(); err != nil {
			fmt.Fprintln(os.Stderr, "chaos: teardown:", err)
		}
		live.Lock()
		delete(live.clusters, c)
		live.Unlock()
	})
}

// call sends one command to node i on a fresh connection.
func (c *cluster) call(i int, timeout time.Duration, args ...string) (any, error) {
	conn := respConn{dial: func() (net.Conn, error) { return c.nw.dial(c.nodes[i].addr(), timeout) }}
	defer conn.close()
	v, _, err := conn.do(timeout, args...)
	return v, err
}

// indexOf returns the index of the node with Raft ID id, or -1.
func (c *cluster) indexOf(id string) int {
	for i, n := range c.nodes {
		if n.id == id {
			return i
		}
	}
	return -1
}

// all returns the index of every node.
func (c *cluster) all() []int { return others(len(c.nodes), -1) }

// up returns the indexes of the nodes that run and are not paused.
func (c *cluster) up() []int {
	var out []int
	for i, n := range c.nodes {
		if n.running() && !n.isPaused() {
			out = append(out, i)
		}
	}
	return out
}

// leaderSeenBy returns the leader node i names in FENCE.LEADER, or -1.
func (c *cluster) leaderSeenBy(i int) (int, error) {
	v, err := c.call(i, adminTimeout, "FENCE.LEADER")
	if err != nil {
		return -1, err
	}
	if v == nil {
		return -1, nil
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return -1, fmt.Errorf("FENCE.LEADER answered %#v", v)
	}
	id, _ := a[0].(string)
	return c.indexOf(id), nil
}

// leader returns the leader named by a majority of the cluster's nodes
// among those that are up, or -1.
func (c *cluster) leader() int {
	votes := make(map[int]int)
	for _, i := range c.up() {
		if l, err := c.leaderSeenBy(i); err == nil && l >= 0 {
			votes[l]++
		}
	}
	for l, v := range votes {
		if v > len(c.nodes)/2 {
			return l
		}
	}
	return -1
}

// awaitLeader waits until a majority names one leader, and returns it.
func (c *cluster) awaitLeader(within time.Duration) (int, error) {
	deadline := time.Now().Add(within)
	for {
		if l := c.leader(); l >= 0 {
			return l, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("no leader named by a majority within %v", within)
		}
		time.Sleep(pollEvery)
	}
}

// members returns the Raft IDs and roles node i lists in FENCE.MEMBERS.
func (c *cluster) members(i int) (map[string]string, error) {
	v, err := c.call(i, adminTimeout, "FENCE.MEMBERS")
	if err != nil {
		return nil, err
	}
	rows, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("FENCE.MEMBERS answered %#v", v)
	}
	out := make(map[string]string)
	for _, r := range rows {
		f, ok := r.([]any)
		if !ok || len(f) != 4 {
			return nil, fmt.Errorf("FENCE.MEMBERS row %#v", r)
		}
		id, _ := f[0].(string)
		client, _ := f[2].(string)
		role, _ := f[3].(string)
		if id == "" || client == "" {
			return nil, fmt.Errorf("FENCE.MEMBERS row %#v has no client address yet", r)
		}
		out[id] = role
	}
	return out, nil
}

// membersOK reports, once, whether every node is up, lists every node as a
// voter with its client address, and names the same leader.
func (c *cluster) membersOK() error {
	leader := ""
	for i, n := range c.nodes {
		if !n.running() || n.isPaused() {
			return fmt.Errorf("%s is down", n.id)
		}
		ms, err := c.members(i)
		if err != nil {
			return fmt.Errorf("%s: %w", n.id, err)
		}
		if len(ms) != len(c.nodes) {
			return fmt.Errorf("%s lists %d members: %v", n.id, len(ms), ms)
		}
		for id, role := range ms {
			if c.indexOf(id) < 0 || role == "nonvoter" {
				return fmt.Errorf("%s lists %s as %s", n.id, id, role)
			}
			if role == "leader" {
				if leader != "" && leader != id {
					return fmt.Errorf("leaders %s and %s named", leader, id)
				}
				leader = id
			}
		}
	}
	if leader == "" {
		return errors.New("no leader listed")
	}
	return nil
}

// awaitMembers waits until membersOK holds.
func (c *cluster) awaitMembers(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := c.membersOK()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster did not form within %v: %w", within, err)
		}
		time.Sleep(pollEvery)
	}
}

// stateHash is one node's FENCE.STATEHASH.
type stateHash struct {
	index uint64
	hash  string
}

func (c *cluster) stateHash(i int) (stateHash, error) {
	v, err := c.call(i, adminTimeout, "FENCE.STATEHASH")
	if err != nil {
		return stateHash{}, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return stateHash{}, fmt.Errorf("FENCE.STATEHASH answered %#v", v)
	}
	idx, ok1 := a[0].(int64)
	h, ok2 := a[1].(string)
	if !ok1 || !ok2 {
		return stateHash{}, fmt.Errorf("FENCE.STATEHASH answered %#v", v)
	}
	return stateHash{uint64(idx), h}, nil
}

// awaitConverged waits until every node reports the same applied index,
// and each node the same index and hash in two polls in a row, and returns
// what it saw then. Equal indexes with different hashes are a divergence,
// reported by the caller. (Raft may count an entry as applied a moment
// before the table has it, hence the second poll.) If some node still cannot
// be read at the deadline, the error is an *unreadableError: nothing could
// be compared.
func (c *cluster) awaitConverged(within time.Duration) ([]stateHash, error) {
	deadline := time.Now().Add(within)
	var prev []stateHash
	for {
		cur := make([]stateHash, len(c.nodes))
		var unread []string
		for i := range c.nodes {
			var err error
			if cur[i], err = c.stateHash(i); err != nil {
				unread = append(unread, fmt.Sprintf("%s: %v", c.nodes[i].id, err))
			}
		}
		same := len(unread) == 0
		for i := range cur {
			same = same && cur[i].index == cur[0].index
		}
		if same && slices.Equal(prev, cur) {
			return cur, nil
		}
		if !same {
			prev = nil
		} else {
			prev = cur
		}
		if time.Now().After(deadline) {
			if len(unread) > 0 {
				return cur, &unreadableError{within: within, nodes: unread}
			}
			return cur, fmt.Errorf("applied indexes did not converge within %v: %v", within, cur)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// unreadableError: some node's state could not be read (down, or not
// answering) until awaitConverged gave up.
type unreadableError struct {
	within time.Duration
	nodes  []string // "n1: why", per node not read
}

func (e *unreadableError) Error() string {
	return fmt.Sprintf("could not read the state of every node within %v: %s", e.within, strings.Join(e.nodes, "; "))
}
