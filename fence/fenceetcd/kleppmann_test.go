package fenceetcd_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/fence"
	"github.com/fencerlock/fencer/internal/fencetest"
)

// fencerd returns the fencerd binary to run: $FENCERD, or one built now
// from this repository (two directories up from this package, which is a
// module of its own).
func fencerd(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FENCERD"); p != "" {
		return p
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	must(t, err)
	out := filepath.Join(t.TempDir(), "fencerd")
	build := exec.Command("go", "build", "-o", out, "./cmd/fencerd")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building fencerd in %s (or set FENCERD to a fencerd binary): %v\n%s", root, err, b)
	}
	return out
}

// startFencerd starts a one-node fencer on free loopback ports, stopped
// when the test ends, and returns a client of it once it has a leader.
func startFencerd(t *testing.T) *client.Client {
	t.Helper()
	bin := fencerd(t)
	dir := t.TempDir()
	port, err := freePort()
	must(t, err)
	raftPort, err := freePort()
	must(t, err)
	addr := "127.0.0.1:" + port
	log, err := os.Create(filepath.Join(dir, "fencerd.log"))
	must(t, err)
	defer log.Close()
	cmd := exec.Command(bin, "--listen", addr, "--raft-listen", "127.0.0.1:"+raftPort,
		"--http-listen", "off", "--data-dir", filepath.Join(dir, "data"))
	cmd.Stdout, cmd.Stderr = log, log
	must(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Error("fencerd did not stop within 10s of SIGTERM; killed")
		}
	})
	// Wait for the port before the client dials it: go-redis logs every
	// refused dial.
	if err := waitDial(addr, 30*time.Second, exited); err != nil {
		out, _ := os.ReadFile(log.Name())
		t.Fatalf("fencerd: %v\n%s", err, out)
	}
	c, err := client.New([]string{addr})
	must(t, err)
	t.Cleanup(func() { c.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, leader, err := c.Leader(ctx)
		cancel()
		if err == nil && leader != "" {
			return c
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("fencerd exited: %v\n%s", cmd.ProcessState, out)
		default:
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("fencerd at %s has no leader after 30s (last: %v)\n%s", addr, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKleppmannPausedWriter is the run from Kleppmann's "How to do
// distributed locking" with fencer's tokens and etcd as the store: holder 1
// takes the lock, checks its lease, and is paused before it writes; its
// lease runs out; holder 2 takes the lock (a higher token) and writes;
// holder 1 resumes and writes. etcd refuses holder 1's write.
func TestKleppmannPausedWriter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startFencerd(t)
	s, kvs := newStore(t)

	lease1, err := c.Acquire(ctx, "report", client.WithTTL(time.Second))
	must(t, err)
	if err := lease1.Err(); err != nil { // the last look at the lease
		t.Fatalf("lease 1 ended at once: %v", err)
	}
	must(t, s.Put(ctx, "report", lease1.Token(), "holder 1, draft"))

	resume, late := make(chan struct{}), make(chan error, 1)
	go func() {
		<-resume // the pause: GC, SIGSTOP, a slow network
		late <- s.Put(ctx, "report", lease1.Token(), "holder 1, late")
	}()
	defer close(resume) // a failure below still ends the goroutine

	// Holder 2 waits for holder 1's lease to run out, and writes.
	lease2, err := c.Acquire(ctx, "report", client.WithTTL(10*time.Second))
	must(t, err)
	defer lease2.Release(ctx)
	if lease2.Token() <= lease1.Token() {
		t.Fatalf("holder 2's token %d is not above holder 1's %d", lease2.Token(), lease1.Token())
	}
	must(t, s.Put(ctx, "report", lease2.Token(), "holder 2"))

	resume <- struct{}{}
	err = <-late
	fencetest.WantStale(t, err, "report", lease1.Token(), lease2.Token())
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Errorf("errors.Is(%v, fence.ErrStaleToken) is false", err)
	}
	wantValue(t, kvs, "report", "holder 2")
	// Holder 2 keeps writing; equal tokens are admitted.
	must(t, s.Put(ctx, "report", lease2.Token(), "holder 2, again"))
	wantValue(t, kvs, "report", "holder 2, again")
}
