//go:build linux

package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The test network. Its addresses exist only inside the namespaces that a
// network creates: the hub holds the bridge and hubIP, node i holds
// nodeIP(i). Nothing is added to the root namespace.
const (
	subnetBits = 24
	hubIP      = "10.77.0.1"
	clientPort = "7379"
	raftPort   = "7380"
	// namePrefix starts every namespace the campaign creates; the test
	// process's pid follows, so concurrent runs never share a name and
	// leftovers of dead runs can be told apart.
	namePrefix = "fch"
)

// nodeIP returns the address of node i (0-based).
func nodeIP(i int) string { return "10.77.0." + strconv.Itoa(11+i) }

// networkSeq numbers the networks of this process.
var networkSeq atomic.Int64

// network is a hub namespace with a bridge, and one namespace per node linked
// to it by a veth pair. blocked[to][from] drops at node to what node from
// sends it.
type network struct {
	prefix string
	hub    string
	nodes  []string
	hubNS  *os.File // open handle on the hub namespace, for dialling

	mu      sync.Mutex
	blocked [][]bool
}

// newNetwork creates the namespaces, the bridge and the links for n nodes.
// On error it removes whatever it created.
func newNetwork(n int) (nw *network, err error) {
	prefix := fmt.Sprintf("%s%dc%d", namePrefix, os.Getpid(), networkSeq.Add(1))
	nw = &network{prefix: prefix, hub: prefix + "h"}
	for i := range n {
		nw.nodes = append(nw.nodes, fmt.Sprintf("%sn%d", prefix, i+1))
		nw.blocked = append(nw.blocked, make([]bool, n))
	}
	defer func() {
		if err != nil {
			_ = nw.teardown()
		}
	}()
	cidr := func(ip string) string { return ip + "/" + strconv.Itoa(subnetBits) }
	steps := [][]string{
		{"netns", "add", nw.hub},
		{"-n", nw.hub, "link", "set", "lo", "up"},
		{"-n", nw.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", nw.hub, "addr", "add", cidr(hubIP), "dev", "br0"},
		{"-n", nw.hub, "link", "set", "br0", "up"},
	}
	for i, ns := range nw.nodes {
		peer := "v" + strconv.Itoa(i+1)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			// Both ends are created inside their namespaces: no interface
			// ever appears in the root namespace.
			[]string{"link", "add", "name", "eth0", "netns", ns, "type", "veth", "peer", "name", peer, "netns", nw.hub},
			[]string{"-n", nw.hub, "link", "set", peer, "master", "br0"},
			[]string{"-n", nw.hub, "link", "set", peer, "up"},
			[]string{"-n", ns, "addr", "add", cidr(nodeIP(i)), "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			return nil, err
		}
	}
	f, err := os.Open("/run/netns/" + nw.hub)
	if err != nil {
		return nil, err
	}
	nw.hubNS = f
	return nw, nil
}

// run runs a command and returns its output in the error if it fails.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// dial opens a TCP connection from the hub namespace. The socket is created
// on a thread that entered the hub namespace and is then thrown away (the
// goroutine ends locked to it), so no other goroutine ever runs there.
func (nw *network) dial(addr string, timeout time.Duration) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with us
		if err := unix.Setns(int(nw.hubNS.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %w", nw.hub, err)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, timeout)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// setBlocked replaces the partition: blocked[to][from] true drops at node to
// every packet from node from. Clients (the hub) are never cut off.
func (nw *network) setBlocked(blocked [][]bool) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var errs []error
	for to, ns := range nw.nodes {
		rules := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
		for from := range nw.nodes {
			if blocked[to][from] && from != to {
				rules += fmt.Sprintf("-A INPUT -s %s/32 -j DROP\n", nodeIP(from))
			}
		}
		rules += "COMMIT\n"
		cmd := exec.Command("ip", "netns", "exec", ns, "iptables-restore")
		cmd.Stdin = strings.NewReader(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("iptables-restore in %s: %v: %s", ns, err, bytes.TrimSpace(out)))
			continue
		}
		copy(nw.blocked[to], blocked[to])
	}
	return errors.Join(errs...)
}

// heal removes every partition rule.
func (nw *network) heal() error {
	return nw.setBlocked(newMatrix(len(nw.nodes)))
}

// newMatrix returns an n×n matrix with nothing blocked.
func newMatrix(n int) [][]bool {
	m := make([][]bool, n)
	for i := range m {
		m[i] = make([]bool, n)
	}
	return m
}

// teardown deletes every namespace of the network, with the links and
// rules inside them. Processes still in them must have been stopped.
func (nw *network) teardown() error {
	if nw.hubNS != nil {
		_ = nw.hubNS.Close()
		nw.hubNS = nil
	}
	var errs []error
	for _, ns := range append(append([]string(nil), nw.nodes...), nw.hub) {
		if _, err := os.Stat("/run/netns/" + ns); err != nil {
			continue
		}
		if err := run("ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeLeftovers deletes the namespaces of campaign runs whose process is
// gone (a run killed before its cleanup), after killing what still runs in
// them. Namespaces of live processes, other runs included, are left alone.
func removeLeftovers() error {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("ip netns list: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.HasPrefix(name, namePrefix) {
			continue
		}
		digits := strings.TrimPrefix(name, namePrefix)
		end := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' })
		if end <= 0 {
			continue
		}
		pid, err := strconv.Atoi(digits[:end])
		if err != nil || pidAlive(pid) {
			continue
		}
		if pids, err := exec.Command("ip", "netns", "pids", name).Output(); err == nil {
			for _, f := range strings.Fields(string(pids)) {
				if p, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			}
		}
		if err := run("ip", "netns", "del", name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pidAlive reports whether a process with pid exists.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
