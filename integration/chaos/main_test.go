//go:build linux

package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"testing"

	"github.com/fencerlock/fencer/internal/testbin"
)

// The binaries built by TestMain.
var (
	// fencerdBin is fencerd as shipped.
	fencerdBin string
	// faultyBin is fencerd built with -tags fencer_faults: it behaves as
	// shipped unless FENCER_FAULTS names a deliberate bug.
	faultyBin string
	// unavailable says why the campaign cannot run here (not root); the
	// tests skip with it.
	unavailable string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	for _, tool := range []string{"ip", "iptables", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %s is not on PATH; the fault campaign needs ip(8) and iptables(8)"+
				" (Debian/Ubuntu: apt-get install iproute2 iptables)\n", tool)
			return 1
		}
	}
	if os.Geteuid() != 0 {
		unavailable = "the fault campaign needs root: it creates network namespaces and iptables rules"
		return m.Run()
	}
	if err := removeLeftovers(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: removing leftovers of earlier runs:", err)
	}
	dir, err := os.MkdirTemp("", "fencer-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	var race []string
	if os.Getenv("CHAOS_RACE") == "1" {
		race = []string{"-race"}
	}
	if fencerdBin, faultyBin, err = testbin.BuildFencerd(dir, race...); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: building fencerd:", err)
		return 1
	}
	// An interrupted run still removes its namespaces and processes.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "chaos: %v: tearing down\n", s)
		tearDownAll()
		os.Exit(2)
	}()
	code := m.Run()
	tearDownAll()
	return code
}

// tearDownAll tears down every cluster that still runs.
func tearDownAll() {
	live.Lock()
	var cs []*cluster
	for c := range live.clusters {
		cs = append(cs, c)
	}
	live.Unlock()
	for _, c := range cs {
		c.teardown()
	}
}

// requireRoot fails the test where the campaign cannot run: it needs root
// for network namespaces, and iproute2 and iptables (.ci/run installs them).
func requireRoot(t *testing.T) {
	t.Helper()
	if unavailable != "" {
		t.Fatal(unavailable)
	}
}

// spawns carries commands to spawnLoop.
var spawns = make(chan spawnRequest)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// spawnOnce starts spawnLoop the first time a command is started.
var spawnOnce sync.Once

// spawnLoop starts every fencerd from one thread that it keeps for the
// life of the test process. Pdeathsig fires when the thread that forked a
// child exits, and the Go runtime ends a thread when a goroutine locked to
// it returns (network.dial does that); forking only here keeps fencerd
// alive exactly as long as this process.
func spawnLoop() {
	runtime.LockOSThread()
	for r := range spawns {
		r.done <- r.cmd.Start()
	}
}

// startCmd starts cmd from the spawning thread.
func startCmd(cmd *exec.Cmd) error {
	spawnOnce.Do(func() { go spawnLoop() })
	done := make(chan error, 1)
	spawns <- spawnRequest{cmd, done}
	return <-done
}
