package integration

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The container image (Containerfile, scripts/image.sh) as a cluster:
// three containers formed with --bootstrap-expect on a container network
// the test creates. Everything the test makes has a unique name and is
// removed when it ends, failure included.

// engine is a container engine (podman, or docker with a running engine)
// with the flags this machine needs to run a container (runc or crun,
// the cgroup manager, rlimits no higher than the shell's hard limits).
type engine struct {
	bin      string
	runFlags []string
}

func (e *engine) cmd(args ...string) (string, error) {
	out, err := exec.Command(e.bin, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (e *engine) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.cmd(args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", e.bin, strings.Join(args, " "), err, out)
	}
	return out
}

// findEngine returns podman, or docker if its engine answers, or nil.
func findEngine() *engine {
	if p, err := exec.LookPath("podman"); err == nil {
		return &engine{bin: p}
	}
	if p, err := exec.LookPath("docker"); err == nil && exec.Command(p, "info").Run() == nil {
		return &engine{bin: p}
	}
	return nil
}

// detectRunFlags finds the run flags under which image starts here: the
// engine's defaults first, then Debian's runc with cgroupfs; each with no
// rlimits, then with nofile and nproc at this process's hard limits, then
// lower (a container's runtime may be refused the hard limit itself).
func (e *engine) detectRunFlags(t *testing.T, image string) {
	t.Helper()
	runtimes := [][]string{nil}
	if _, err := os.Stat("/usr/sbin/runc"); err == nil && filepath.Base(e.bin) == "podman" {
		runtimes = append(runtimes, []string{"--runtime", "/usr/sbin/runc", "--cgroup-manager=cgroupfs"})
	}
	var nofile, nproc syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile)
	_ = syscall.Getrlimit(rlimitNproc, &nproc)
	limits := [][]string{nil}
	for _, n := range []uint64{nproc.Max, 4096, 1024} {
		if n == 0 || n > nproc.Max {
			continue
		}
		f := min(nofile.Max, 65536)
		limits = append(limits, []string{"--ulimit", fmt.Sprintf("nofile=%d:%d", f, f), "--ulimit", fmt.Sprintf("nproc=%d:%d", n, n)})
	}
	var tried []string
	for _, r := range runtimes {
		for _, l := range limits {
			flags := append(append([]string(nil), r...), l...)
			out, err := e.cmd(append(append([]string{"run", "--rm"}, flags...), image, "--version")...)
			if err == nil && strings.HasPrefix(out, "fencerd ") {
				e.runFlags = flags
				t.Logf("containers run here with %q", flags)
				return
			}
			tried = append(tried, fmt.Sprintf("%q: %s", flags, lastLine(out)))
		}
	}
	t.Fatalf("no way to run a container found:\n%s", strings.Join(tried, "\n"))
}

// rlimitNproc is Linux's RLIMIT_NPROC, which package syscall does not name.
const rlimitNproc = 6

func uniqueName(t *testing.T) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "fencer-test-" + hex.EncodeToString(b[:])
}

// A lock survives the kill of the leader's container; tokens grow after
// it; the killed container, started again on its volume, rejoins.
func TestImageCluster(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("containers: linux only")
	}
	e := findEngine()
	if e == nil {
		t.Skip("neither podman nor a docker with a running engine here (scripts/deps.sh installs podman)")
	}
	if os.Geteuid() != 0 && filepath.Base(e.bin) == "podman" {
		t.Skip("the container network needs root (podman's rootless networks are not reachable from the host)")
	}
	name := uniqueName(t)
	image := "localhost/" + name + ":test"
	start := time.Now()
	build := exec.Command("../scripts/image.sh", image)
	build.Env = append(os.Environ(), "RELEASE_DIRTY=1", "IMAGE_ENGINE="+e.bin)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = e.cmd("rmi", "-f", image) })
	t.Logf("image %s built in %v", image, time.Since(start).Round(time.Millisecond))
	e.detectRunFlags(t, image)

	// A network of its own, on a /24 chosen at random (retried if taken).
	var prefix string
	for try := 0; ; try++ {
		var b [2]byte
		_, _ = rand.Read(b[:])
		prefix = fmt.Sprintf("10.%d.%d.", 100+int(b[0])%100, b[1])
		out, err := e.cmd("network", "create", "--subnet", prefix+"0/24", name)
		if err == nil {
			break
		}
		if try == 5 {
			t.Fatalf("network create: %v\n%s", err, out)
		}
	}
	t.Cleanup(func() { _, _ = e.cmd("network", "rm", "-f", name) })

	// The pods' command line of the Helm chart (deploy/helm/fencer): every
	// node by a stable name, here resolved through each container's
	// /etc/hosts (the test dials the names' addresses: testHosts).
	const n = 3
	names, ips, addrs := make([]string, n), make([]string, n), make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("fencer-%d.fencer-peers.%s.svc", i, name)
		ips[i] = prefix + strconv.Itoa(11+i)
		addrs[i] = names[i] + ":7379"
		testHosts.Store(names[i], ips[i])
	}
	t.Cleanup(func() {
		for _, h := range names {
			testHosts.Delete(h)
		}
	})
	containers := make([]string, n)
	c := &nodeCluster{ids: make([]string, n)}
	for i := range n {
		containers[i] = fmt.Sprintf("%s-%d", name, i)
		vol := containers[i]
		e.must(t, "volume", "create", vol)
		t.Cleanup(func() { _, _ = e.cmd("volume", "rm", "-f", vol) })
		c.nodes = append(c.nodes, &daemon{addr: addrs[i]})
	}
	t.Cleanup(func() {
		for _, ct := range containers {
			if t.Failed() {
				out, _ := e.cmd("logs", ct)
				t.Logf("=== %s's log:\n%s", ct, out)
			}
			_, _ = e.cmd("rm", "-f", "-t", "0", ct)
		}
	})
	var hosts []string
	for i := range n {
		hosts = append(hosts, "--add-host", names[i]+":"+ips[i])
	}
	for _, i := range mathrand.Perm(n) {
		args := append([]string{"run", "-d", "--name", containers[i], "--network", name, "--ip", ips[i], "-v", containers[i] + ":/data"}, hosts...)
		args = append(append(args, e.runFlags...), image,
			fmt.Sprintf("--id=fencer-%d", i),
			"--data-dir=/data",
			"--listen=0.0.0.0:7379",
			"--raft-listen=0.0.0.0:7380",
			"--http-listen=0.0.0.0:7381",
			"--advertise="+names[i]+":7379",
			"--raft-advertise="+names[i]+":7380",
			"--bootstrap-expect=3",
			"--join="+strings.Join(addrs, ","),
			"--protected-mode=false")
		e.must(t, args...)
	}
	id, first := c.formed(t, c.all(), c.all())
	leader := c.agreedLeader(t, c.all(), clusterReadyTimeout)
	t.Logf("3 containers formed cluster %s in %v; leader fencer-%d; first token %d", id, time.Since(start).Round(time.Millisecond), leader, first)

	v, err := clusterCall(addrs[0], requestTimeout, "FENCE.MEMBERS")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := parseClusterMembers(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if i := c.indexOf(m.id); i < 0 || m.raftAddr != names[i]+":7380" {
			t.Fatalf("member %+v: want the Raft address by name", m)
		}
	}

	held := c.mustGrant(t, leader, clusterRetryWithin, "survives", "o", 5*time.Minute)
	killed := time.Now()
	e.must(t, "kill", containers[leader])
	next, _ := c.awaitNewLeader(t, c.others(leader), c.ids[leader], killed, clusterElectionTimeout+clusterReadyTimeout)
	s, ok := c.statusOf(t, next, clusterRetryWithin, "survives")
	if !ok || s.owner != "o" || s.token != held.token {
		t.Fatalf("after the leader's container was killed, the lock is %+v (held %v), want owner o, token %d", s, ok, held.token)
	}
	after := c.mustGrant(t, next, clusterRetryWithin, "after-kill", "o", time.Minute)
	if after.token <= held.token {
		t.Fatalf("token %d after the kill, not above %d", after.token, held.token)
	}
	t.Logf("killed fencer-%d (leader); fencer-%d leads; the lock kept token %d; the next grant got %d", leader, next, held.token, after.token)

	e.must(t, "start", containers[leader])
	if again, token := c.formed(t, c.all(), c.all()); again != id || token <= after.token {
		t.Fatalf("after fencer-%d restarted: cluster %s token %d, want cluster %s and a token above %d", leader, again, token, id, after.token)
	} else {
		t.Logf("fencer-%d restarted on its volume and rejoined cluster %s; token %d", leader, id, token)
	}
}
