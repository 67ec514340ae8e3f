package lazyfs

// The tests here run real stores on a mount: hashicorp/raft's snapshot
// store, fencer's log stores, and processes in other mount namespaces.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/hashicorp/raft"
)

// TestSnapshotStore runs hashicorp/raft's FileSnapshotStore as fencer
// uses it: it fsyncs a snapshot's files and its parent directory, not the
// snapshot's own directory, and removes old snapshots without an fsync.
func TestSnapshotStore(t *testing.T) {
	state := pattern('s', 3*pageSize+5)
	take := func(t *testing.T, s *raft.FileSnapshotStore, index uint64) string {
		t.Helper()
		sink, err := s.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Write(state); err != nil {
			t.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		return sink.ID()
	}
	// retain is 1, so that a new snapshot reaps the one before, and List
	// reports the newest only.
	open := func(t *testing.T, mp string) *raft.FileSnapshotStore {
		t.Helper()
		s, err := raft.NewFileSnapshotStore(mp, 1, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		fsync(t, mp) // as server's node does once its stores are open
		return s
	}
	snapshots := func(t *testing.T, s *raft.FileSnapshotStore) []string {
		t.Helper()
		metas, err := s.List()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range metas {
			_, rc, err := s.Open(m.ID)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			_ = rc.Close()
			if err != nil || !bytes.Equal(got, state) {
				t.Fatalf("snapshot %s reads %d bytes, %v", m.ID, len(got), err)
			}
			ids = append(ids, m.ID)
		}
		return ids
	}

	t.Run("raft alone", func(t *testing.T) {
		f, mp := mount(t, Options{})
		id := take(t, open(t, mp), 10)
		cut(t, f)
		// The directory's name was made durable, its files were not.
		wantNames(t, filepath.Join(mp, "snapshots"), id)
		wantNames(t, filepath.Join(mp, "snapshots", id))
		if ids := snapshots(t, open(t, mp)); len(ids) != 0 {
			t.Fatalf("snapshots %v after the cut, want none that read", ids)
		}
	})
	t.Run("snapshot dir fsynced", func(t *testing.T) {
		f, mp := mount(t, Options{})
		id := take(t, open(t, mp), 10)
		fsync(t, filepath.Join(mp, "snapshots", id)) // server's durableSink
		cut(t, f)
		if ids := snapshots(t, open(t, mp)); len(ids) != 1 || ids[0] != id {
			t.Fatalf("snapshots %v after the cut, want [%s]", ids, id)
		}
	})
	t.Run("reaped snapshot comes back", func(t *testing.T) {
		f, mp := mount(t, Options{})
		s := open(t, mp)
		old := take(t, s, 10)
		fsync(t, filepath.Join(mp, "snapshots", old))
		time.Sleep(2 * time.Millisecond) // IDs hold the time in ms
		newer := take(t, s, 20)
		fsync(t, filepath.Join(mp, "snapshots", newer))
		wantNames(t, filepath.Join(mp, "snapshots"), newer)
		cut(t, f)
		// Raft removed it without an fsync of the parent.
		wantNames(t, filepath.Join(mp, "snapshots"), old, newer)
		wantNames(t, filepath.Join(mp, "snapshots", old), "meta.json", "state.bin")
		if ids := snapshots(t, open(t, mp)); len(ids) != 1 || ids[0] != newer {
			t.Fatalf("snapshots %v after the cut, want [%s]", ids, newer)
		}
	})
}

// TestPowerCutCutsOffOtherMountNamespaces: a process started in a mount
// namespace of its own (as ip netns exec starts one) holds a copy of the
// mount that unmounting here does not remove. The cut must not wait for
// it, and the process must not read or write on after the cut.
func TestPowerCutCutsOffOtherMountNamespaces(t *testing.T) {
	f, mp := mount(t, Options{})
	p := filepath.Join(mp, "a")
	durable(t, p, []byte("A"))

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), readChildEnv+"="+p)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	read := func() string {
		t.Helper()
		if _, err := io.WriteString(stdin, "read\n"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatalf("the child said nothing: %v", lines.Err())
		}
		return lines.Text()
	}
	if got := read(); got != "A" {
		t.Fatalf("the child read %q before the cut, want A", got)
	}

	done := make(chan error, 1)
	go func() {
		_, err := f.PowerCut()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the power cut waits for the other mount namespace")
	}
	if got := read(); !strings.Contains(got, syscall.ENOTCONN.Error()) {
		t.Fatalf("the child read %q after the cut, want %v", got, syscall.ENOTCONN)
	}
	wantFile(t, p, []byte("A"))
}

// readChild reads path each time a line comes on stdin, and prints the
// contents or the error.
func readChild(path string) {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(string(b))
	}
}

// TestRaftStoreRoundTrip stores entries and stable values through
// fencer's log store, cuts the power, and finds them all. The store runs in
// a child process, as fencerd does: bbolt (raft-wal's meta store) maps its
// file into memory, and a process that faults in pages of a FUSE file it
// serves itself can deadlock in the kernel.
func TestRaftStoreRoundTrip(t *testing.T) {
	f, dir := mountDataDir(t)
	var last uint64
	// The first round only votes: a node's term and vote must survive
	// before its log holds anything.
	for round, n := range []uint64{0, 70, 70} {
		runStoreChild(t, "write", dir, round, last+1, last+n, true)
		last += n
		start := time.Now()
		cut(t, f)
		t.Logf("power cut took %v", time.Since(start))
		runStoreChild(t, "check", dir, round, 1, last, true)
	}
}

// TestRaftWALRecoveredTail: opening a WAL whose tail segment file is
// missing (its name was never made durable) creates the file again, and
// raft-wal v0.4.2 fsyncs a directory only at the first Sync of a file it
// created. If that process ends before appending, the next one finds the
// file and opens it as an old one: its appends are fsynced, the file's name
// never is, and a power cut would take the segment and every entry in it.
// server.OpenRaftStore fsyncs the WAL's directory once it is open, so the
// entries stay.
func TestRaftWALRecoveredTail(t *testing.T) {
	f, dir := mountDataDir(t)
	runStoreChild(t, "write", dir, 0, 1, 0, false)  // a new node: no entries yet
	cut(t, f)                                       // the tail segment's name may go
	runStoreChild(t, "check", dir, 0, 1, 0, false)  // open again, append nothing
	runStoreChild(t, "write", dir, 1, 1, 70, false) // append and fsync 70 entries
	cut(t, f)
	runStoreChild(t, "check", dir, 1, 1, 70, false) // all there
}

// mountDataDir mounts a lazy file system with a durable data directory
// in it.
func mountDataDir(t *testing.T) (*FS, string) {
	t.Helper()
	f, mp := mount(t, Options{Torn: true, Seed: 1})
	dir := filepath.Join(mp, "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fsync(t, mp)
	return f, dir
}

// runStoreChild runs storeChild in a new process of this test binary.
func runStoreChild(t *testing.T, op, dir string, round int, from, to uint64, syncWAL bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %d %d %t", storeChildEnv, op, dir, round, from, to, syncWAL))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s ..%d in round %d: %v\n%s", op, to, round, err, out)
	}
}

// The environment variables that make this test binary a child process.
const (
	storeChildEnv = "LAZYFS_STORE_CHILD"
	readChildEnv  = "LAZYFS_READ_CHILD"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(readChildEnv); path != "" {
		readChild(path)
		os.Exit(0)
	}
	if args := os.Getenv(storeChildEnv); args != "" {
		if err := storeChild(args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// storeChild opens a log store as fencer's node does (and with syncWAL
// fsyncs the WAL's directory too) and either writes entries from..to and
// the stable values of round, or checks that the log holds exactly entries
// from..to and the values of round.
func storeChild(args string) (err error) {
	var op, dir string
	var round int
	var from, to uint64
	var syncWAL bool
	if _, err := fmt.Sscan(args, &op, &dir, &round, &from, &to, &syncWAL); err != nil {
		return fmt.Errorf("child arguments %q: %w", args, err)
	}
	s, err := server.OpenRaftStore(dir)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := s.Close(); err == nil {
			err = cerr
		}
	}()
	// As server's node does once its stores are open.
	dirs := []string{dir}
	if syncWAL {
		dirs = append(dirs, filepath.Join(dir, "wal"))
	}
	for _, dir := range dirs {
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		err = d.Sync()
		_ = d.Close()
		if err != nil {
			return err
		}
	}
	entry := func(i uint64) *raft.Log {
		return &raft.Log{Index: i, Term: 1 + i/50, Type: raft.LogCommand, Data: pattern(byte(i), int(i%300))}
	}
	vote := fmt.Sprint("node", round)
	if op == "write" {
		for i := from; i <= to; {
			var batch []*raft.Log
			for ; i <= to && len(batch) < 7; i++ {
				batch = append(batch, entry(i))
			}
			if err := s.StoreLogs(batch); err != nil {
				return err
			}
		}
		if err := s.SetUint64([]byte("CurrentTerm"), uint64(round+5)); err != nil {
			return err
		}
		return s.Set([]byte("LastVoteCand"), []byte(vote))
	}
	first, err := s.FirstIndex()
	if err != nil {
		return err
	}
	last, err := s.LastIndex()
	if err != nil {
		return err
	}
	wantFirst := from
	if to < from {
		wantFirst = 0 // an empty log says 0..0
	}
	if first != wantFirst || last != to {
		return fmt.Errorf("log holds %d..%d, want %d..%d", first, last, wantFirst, to)
	}
	for i := from; i <= to; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if want := entry(i); l.Term != want.Term || !bytes.Equal(l.Data, want.Data) {
			return fmt.Errorf("entry %d: term %d, %d bytes; want term %d, %d bytes", i, l.Term, len(l.Data), want.Term, len(want.Data))
		}
	}
	term, err := s.GetUint64([]byte("CurrentTerm"))
	if err != nil || term != uint64(round+5) {
		return fmt.Errorf("CurrentTerm %d, %v; want %d", term, err, round+5)
	}
	got, err := s.Get([]byte("LastVoteCand"))
	if err != nil || string(got) != vote {
		return fmt.Errorf("LastVoteCand %q, %v; want %q", got, err, vote)
	}
	return nil
}

// BenchmarkFsyncedAppend appends 100 bytes and fdatasyncs, as a WAL does
// for each batch, on lazyfs and, for comparison, on the store's own file
// system.
