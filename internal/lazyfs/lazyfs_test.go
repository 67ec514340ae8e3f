package lazyfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// requireFUSE fails (never skips) where the tests cannot mount: they are
// the only check that the fault campaign's disk model holds.
func requireFUSE(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("lazyfs tests mount FUSE without fusermount and need root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("lazyfs tests need /dev/fuse: %v", err)
	}
}

// mount mounts a lazy file system under a temporary directory and
// unmounts it when the test ends, failed or not.
func mount(t *testing.T, opts Options) (*FS, string) {
	t.Helper()
	requireFUSE(t)
	base := t.TempDir()
	mp := filepath.Join(base, "mnt")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := Mount(mp, filepath.Join(base, "store"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
			// Do not leave a mount behind on the machine.
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	})
	return f, mp
}

func cut(t *testing.T, f *FS) Report {
	t.Helper()
	r, err := f.PowerCut()
	if err != nil {
		t.Fatalf("power cut: %v", err)
	}
	t.Logf("power cut: %v", r)
	return r
}

// writeAt writes data at off in path, creating it, without fsync.
func writeAt(t *testing.T, path string, data []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
}

func fsync(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", path, err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// durable writes a file and fsyncs it and its directory.
func durable(t *testing.T, path string, data []byte) {
	t.Helper()
	writeAt(t, path, data, 0)
	fsync(t, path)
	fsync(t, filepath.Dir(path))
}

func wantFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes %q, want %d bytes %q", path, len(got), abbrev(got), len(want), abbrev(want))
	}
}

func wantGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: stat says %v, want it gone", path, err)
	}
}

func wantNames(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s holds %q, want %q", dir, got, want)
	}
}

func abbrev(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

// pattern is n bytes that differ from offset to offset, seeded by c.
func pattern(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c + byte(i%251)
	}
	return b
}

func TestUnsyncedWriteLost(t *testing.T) {
	f, mp := mount(t, Options{})
	p := filepath.Join(mp, "a")
	durable(t, p, nil)
	writeAt(t, p, []byte("hello"), 0)
	wantFile(t, p, []byte("hello"))

	r := cut(t, f)
	wantFile(t, p, []byte{})
	if want := (Report{Files: 1, Bytes: 5}); r != want {
		t.Fatalf("report %+v, want %+v", r, want)
	}
}

func TestFsyncedWriteKept(t *testing.T) {
	for _, real := range []bool{false, true} {
		t.Run(fmt.Sprintf("RealSync=%v", real), func(t *testing.T) {
			f, mp := mount(t, Options{RealSync: real})
			p := filepath.Join(mp, "a")
			data := pattern('a', 3*pageSize+17)
			durable(t, p, data)

			r := cut(t, f)
			wantFile(t, p, data)
			if r != (Report{}) {
				t.Fatalf("report %+v, want nothing lost", r)
			}
			if r.String() != "nothing lost" {
				t.Fatalf("report says %q", r)
			}
		})
	}
}

// TestChangeAfterFsyncReverts: whatever happens to a file after its last
// fsync, a write or a truncation, the power cut takes it back to what was
// fsynced.
func TestChangeAfterFsyncReverts(t *testing.T) {
	old := pattern('a', 10000)
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, p string)
		want   []byte // nil: old
		// written: the change wrote data, which the report counts.
		written bool
	}{
		{"write same size", func(t *testing.T, p string) { writeAt(t, p, pattern('b', 10000), 0) }, nil, true},
		{"write longer", func(t *testing.T, p string) { writeAt(t, p, pattern('b', 20000), 0) }, nil, true},
		{"write middle across pages", func(t *testing.T, p string) { writeAt(t, p, pattern('b', 5000), 4000) }, nil, true},
		{"append", func(t *testing.T, p string) { writeAt(t, p, pattern('b', 100), 10000) }, nil, true},
		{"write past the end with a gap", func(t *testing.T, p string) { writeAt(t, p, pattern('b', 100), 50000) }, nil, true},
		{"write twice", func(t *testing.T, p string) {
			writeAt(t, p, pattern('b', 10000), 0)
			writeAt(t, p, pattern('c', 10000), 0)
		}, nil, true},
		{"write fsynced in between", func(t *testing.T, p string) {
			writeAt(t, p, pattern('b', 10000), 0)
			fsync(t, p)
			writeAt(t, p, pattern('c', 12000), 0)
		}, pattern('b', 10000), true},
		{"truncate shorter", func(t *testing.T, p string) { truncate(t, p, 100) }, nil, false},
		{"truncate to zero", func(t *testing.T, p string) { truncate(t, p, 0) }, nil, false},
		{"O_TRUNC and rewrite", func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write([]byte("new")); err != nil {
				t.Fatal(err)
			}
		}, nil, false},
		{"truncate shorter then longer", func(t *testing.T, p string) {
			truncate(t, p, 5000)
			truncate(t, p, 12000)
			writeAt(t, p, []byte("x"), 11000)
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[5000:11000], make([]byte, 6000)) {
				t.Fatal("the bytes a truncation cut off came back before the power cut")
			}
		}, nil, false},
		{"truncate longer", func(t *testing.T, p string) { truncate(t, p, 1<<20) }, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, mp := mount(t, Options{})
			p := filepath.Join(mp, "a")
			durable(t, p, old)
			tc.change(t, p)

			r := cut(t, f)
			want := tc.want
			if want == nil {
				want = old
			}
			wantFile(t, p, want)
			if r.Files != 1 || tc.written && (r.Entries != 0 || r.Bytes == 0) {
				t.Fatalf("report %+v, want one file reverted", r)
			}
		})
	}
}

func TestNewFileNeedsDirFsync(t *testing.T) {
	data := []byte("data")
	t.Run("file fsynced, dir not", func(t *testing.T) {
		f, mp := mount(t, Options{})
		p := filepath.Join(mp, "a")
		writeAt(t, p, data, 0)
		fsync(t, p)
		r := cut(t, f)
		wantGone(t, p)
		if r.Entries != 1 {
			t.Fatalf("report %+v, want one entry reverted", r)
		}
	})
	t.Run("file and dir fsynced", func(t *testing.T) {
		f, mp := mount(t, Options{})
		p := filepath.Join(mp, "a")
		durable(t, p, data)
		cut(t, f)
		wantFile(t, p, data)
	})
	t.Run("dir fsynced, file not", func(t *testing.T) {
		f, mp := mount(t, Options{})
		p := filepath.Join(mp, "a")
		writeAt(t, p, data, 0)
		fsync(t, mp)
		cut(t, f)
		wantFile(t, p, []byte{})
	})
	t.Run("subdir fsynced, root not", func(t *testing.T) {
		f, mp := mount(t, Options{})
		d := filepath.Join(mp, "d")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		durable(t, filepath.Join(d, "a"), data)
		cut(t, f)
		wantGone(t, d)
	})
	t.Run("subdir and root fsynced", func(t *testing.T) {
		f, mp := mount(t, Options{})
		d := filepath.Join(mp, "d", "e")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		durable(t, filepath.Join(d, "a"), data)
		fsync(t, filepath.Dir(d))
		fsync(t, mp)
		cut(t, f)
		wantFile(t, filepath.Join(d, "a"), data)
	})
	t.Run("new dir never fsynced itself", func(t *testing.T) {
		f, mp := mount(t, Options{})
		d := filepath.Join(mp, "d")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		writeAt(t, filepath.Join(d, "a"), data, 0)
		fsync(t, filepath.Join(d, "a"))
		fsync(t, mp)
		cut(t, f)
		wantNames(t, d)
	})
}

func TestRenameAndUnlinkRevert(t *testing.T) {
	setup := func(t *testing.T) (*FS, string) {
		f, mp := mount(t, Options{})
		durable(t, filepath.Join(mp, "a"), []byte("A"))
		durable(t, filepath.Join(mp, "b"), []byte("B"))
		return f, mp
	}
	t.Run("rename", func(t *testing.T) {
		f, mp := setup(t)
		if err := os.Rename(filepath.Join(mp, "a"), filepath.Join(mp, "c")); err != nil {
			t.Fatal(err)
		}
		r := cut(t, f)
		wantNames(t, mp, "a", "b")
		wantFile(t, filepath.Join(mp, "a"), []byte("A"))
		if r.Entries != 2 {
			t.Fatalf("report %+v, want 2 entries reverted", r)
		}
	})
	t.Run("rename over a file", func(t *testing.T) {
		f, mp := setup(t)
		if err := os.Rename(filepath.Join(mp, "a"), filepath.Join(mp, "b")); err != nil {
			t.Fatal(err)
		}
		wantNames(t, mp, "b")
		cut(t, f)
		wantFile(t, filepath.Join(mp, "a"), []byte("A"))
		wantFile(t, filepath.Join(mp, "b"), []byte("B"))
	})
	t.Run("rename and dir fsync", func(t *testing.T) {
		f, mp := setup(t)
		if err := os.Rename(filepath.Join(mp, "a"), filepath.Join(mp, "b")); err != nil {
			t.Fatal(err)
		}
		fsync(t, mp)
		cut(t, f)
		wantNames(t, mp, "b")
		wantFile(t, filepath.Join(mp, "b"), []byte("A"))
	})
	t.Run("unlink", func(t *testing.T) {
		f, mp := setup(t)
		writeAt(t, filepath.Join(mp, "a"), []byte("unsynced"), 0)
		if err := os.Remove(filepath.Join(mp, "a")); err != nil {
			t.Fatal(err)
		}
		cut(t, f)
		wantFile(t, filepath.Join(mp, "a"), []byte("A"))
	})
	t.Run("unlink and dir fsync", func(t *testing.T) {
		f, mp := setup(t)
		if err := os.Remove(filepath.Join(mp, "a")); err != nil {
			t.Fatal(err)
		}
		fsync(t, mp)
		cut(t, f)
		wantNames(t, mp, "b")
	})
	t.Run("noreplace and exchange", func(t *testing.T) {
		f, mp := setup(t)
		a, b := filepath.Join(mp, "a"), filepath.Join(mp, "b")
		if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE); !errors.Is(err, unix.EEXIST) {
			t.Fatalf("RENAME_NOREPLACE over a file: %v, want EEXIST", err)
		}
		if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
			t.Fatalf("RENAME_EXCHANGE: %v", err)
		}
		wantFile(t, a, []byte("B"))
		fsync(t, mp)
		cut(t, f)
		wantFile(t, a, []byte("B"))
		wantFile(t, b, []byte("A"))
	})
	t.Run("move between dirs, only the destination fsynced", func(t *testing.T) {
		f, mp := setup(t)
		d := filepath.Join(mp, "d")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		fsync(t, mp)
		if err := os.Rename(filepath.Join(mp, "a"), filepath.Join(d, "a")); err != nil {
			t.Fatal(err)
		}
		fsync(t, d)
		cut(t, f)
		// Each directory's entries are durable on their own: the file
		// is now under both names.
		wantFile(t, filepath.Join(mp, "a"), []byte("A"))
		wantFile(t, filepath.Join(d, "a"), []byte("A"))
		st, err := os.Stat(filepath.Join(d, "a"))
		if err != nil {
			t.Fatal(err)
		}
		if n := st.Sys().(*syscall.Stat_t).Nlink; n != 2 {
			t.Fatalf("nlink %d, want 2", n)
		}
	})
}

func TestFallocate(t *testing.T) {
	f, mp := mount(t, Options{})
	p := filepath.Join(mp, "seg")
	durable(t, p, nil)
	fh, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	fd := int(fh.Fd())
	size := func() int64 {
		t.Helper()
		st, err := fh.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	if err := unix.Fallocate(fd, 0, 0, 1<<20); err != nil {
		t.Fatalf("fallocate: %v", err)
	}
	if got := size(); got != 1<<20 {
		t.Fatalf("size %d after fallocate, want %d", got, 1<<20)
	}
	if err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 2<<20); err != nil {
		t.Fatalf("fallocate KEEP_SIZE: %v", err)
	}
	if got := size(); got != 1<<20 {
		t.Fatalf("size %d after fallocate KEEP_SIZE, want %d", got, 1<<20)
	}
	if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, pageSize); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatalf("punching a hole: %v, want EOPNOTSUPP", err)
	}
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("entry"), 100); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(fd, 0, 0, 3<<20); err != nil {
		t.Fatalf("fallocate: %v", err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}

	cut(t, f)
	wantFile(t, p, make([]byte, 1<<20))
}

// TestTornPage tears one of four overwritten pages, the same one for the
// same seed.
func TestTornPage(t *testing.T) {
	run := func(t *testing.T, seed uint64) string {
		f, mp := mount(t, Options{Torn: true, Seed: seed})
		p := filepath.Join(mp, "t")
		durable(t, p, bytes.Repeat([]byte{'o'}, 4*pageSize))
		writeAt(t, p, bytes.Repeat([]byte{'n'}, 4*pageSize), 0)
		r := cut(t, f)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 4*pageSize {
			t.Fatalf("%d bytes after the cut, want %d", len(got), 4*pageSize)
		}
		torn := ""
		for page := range 4 {
			b := got[page*pageSize : (page+1)*pageSize]
			k := bytes.IndexByte(b, 'o') // new bytes come first
			if k == 0 {
				continue
			}
			if k < 0 || k%sectorSize != 0 || bytes.ContainsRune(b[k:], 'n') || torn != "" {
				t.Fatalf("page %d after the cut: %d new bytes then %q...; want one page torn at a sector boundary", page, k, abbrev(b[max(k, 0):]))
			}
			torn = fmt.Sprintf("t@%d+%d sectors", page*pageSize, k/sectorSize)
		}
		if torn == "" || r.Torn != torn {
			t.Fatalf("report says torn %q, the file %q", r.Torn, torn)
		}
		return torn
	}
	seen := map[string]bool{}
	for seed := range uint64(4) {
		var first, again string
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { first = run(t, seed) })
		t.Run(fmt.Sprint("seed", seed, "again"), func(t *testing.T) { again = run(t, seed) })
		if first != again {
			t.Fatalf("seed %d tore %q, then %q", seed, first, again)
		}
		seen[first] = true
	}
	if len(seen) < 2 {
		t.Fatalf("four seeds tore the same way: %v", seen)
	}
}

func TestWipe(t *testing.T) {
	f, mp := mount(t, Options{})
	if err := os.Mkdir(filepath.Join(mp, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	durable(t, filepath.Join(mp, "d", "a"), []byte("A"))
	fsync(t, mp)
	if err := f.Wipe(); err != nil {
		t.Fatal(err)
	}
	wantNames(t, mp)
	store, err := os.ReadDir(f.store)
	if err != nil || len(store) != 0 {
		t.Fatalf("store holds %v (%v) after Wipe", store, err)
	}
	writeAt(t, filepath.Join(mp, "b"), []byte("B"), 0)
	wantFile(t, filepath.Join(mp, "b"), []byte("B"))
	cut(t, f)
	wantNames(t, mp)
}

func TestPowerCutBusy(t *testing.T) {
	f, mp := mount(t, Options{})
	p := filepath.Join(mp, "a")
	durable(t, p, []byte("A"))
	fh, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	start := time.Now()
	_, err = f.PowerCut()
	t.Logf("refused in %v: %v", time.Since(start), err)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), mp) {
		t.Fatalf("power cut with a file open: %v, want ErrBusy naming %s", err, mp)
	}
	got, err := io.ReadAll(fh)
	if err != nil || string(got) != "A" {
		t.Fatalf("after the refused cut the open file reads %q, %v", got, err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	cut(t, f)
	wantFile(t, p, []byte("A"))
}

// TestConcurrentWriters appends and fsyncs to several files at once while
// names come and go in their directory, as a node's WAL, snapshots and
// stable store do; everything fsynced survives.
func TestConcurrentWriters(t *testing.T) {
	f, mp := mount(t, Options{Torn: true, Seed: 3})
	const writers, records, size = 4, 200, 100
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for w := range writers {
		wg.Go(func() {
			fh, err := os.OpenFile(filepath.Join(mp, fmt.Sprint("log", w)), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				errs <- err
				return
			}
			defer fh.Close()
			for i := range records {
				if _, err := fh.WriteAt(pattern(byte(w+i), size), int64(i*size)); err != nil {
					errs <- err
					return
				}
				if err := fh.Sync(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := filepath.Join(mp, fmt.Sprint("tmp", i%3))
			if err := os.WriteFile(tmp, []byte("x"), 0o644); err != nil {
				errs <- err
				return
			}
			if err := os.Rename(tmp, tmp+".done"); err != nil {
				errs <- err
				return
			}
			d, err := os.Open(mp)
			if err != nil {
				errs <- err
				return
			}
			err = d.Sync()
			_ = d.Close()
			if err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	churn.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fsync(t, mp)

	cut(t, f)
	for w := range writers {
		var want []byte
		for i := range records {
			want = append(want, pattern(byte(w+i), size)...)
		}
		wantFile(t, filepath.Join(mp, fmt.Sprint("log", w)), want)
	}
}

// TestDeletedFilesFreeTheStore checks that a store which deletes old files
// (raft-wal's segments, raft's snapshots) does not fill the disk.
func TestDeletedFilesFreeTheStore(t *testing.T) {
	f, mp := mount(t, Options{})
	storeFiles := func() int {
		t.Helper()
		ents, err := os.ReadDir(f.store)
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	waitStore := func(want int) {
		t.Helper()
		// The kernel sends RELEASE after close returns.
		for deadline := time.Now().Add(5 * time.Second); storeFiles() != want; {
			if time.Now().After(deadline) {
				t.Fatalf("store holds %d files, want %d", storeFiles(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	p := filepath.Join(mp, "seg")
	durable(t, p, pattern('a', 1<<20))
	waitStore(1)

	fh, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	fsync(t, mp)
	waitStore(1) // open
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	waitStore(0)

	durable(t, p, pattern('b', 100))
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	waitStore(1) // its durable name holds it
	fsync(t, mp)
	waitStore(0)
}

func BenchmarkFsyncedAppend(b *testing.B) {
	requireFUSE(b)
	base := b.TempDir()
	mp := filepath.Join(base, "mnt")
	if err := os.Mkdir(mp, 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := Mount(mp, filepath.Join(base, "store"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			b.Errorf("unmount: %v", err)
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	})
	for _, dir := range []struct{ name, path string }{{"lazyfs", mp}, {"store", base}} {
		b.Run(dir.name, func(b *testing.B) {
			fh, err := os.OpenFile(filepath.Join(dir.path, "wal"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer fh.Close()
			if err := unix.Fallocate(int(fh.Fd()), 0, 0, 64<<20); err != nil {
				b.Fatal(err)
			}
			if err := fh.Sync(); err != nil {
				b.Fatal(err)
			}
			rec := pattern('r', 100)
			var off int64
			for b.Loop() {
				if _, err := fh.WriteAt(rec, off); err != nil {
					b.Fatal(err)
				}
				if err := unix.Fdatasync(int(fh.Fd())); err != nil {
					b.Fatal(err)
				}
				off = (off + int64(len(rec))) % (64<<20 - 100)
			}
		})
	}
}

// TestParallelPowerCuts cuts several mounts at once, again and again: each
// aborts its own FUSE connection by device number, and a mount made in
// between must not be the one aborted (every mount still serves after).
func TestParallelPowerCuts(t *testing.T) {
	const mounts, rounds = 4, 15
	var fss []*FS
	var mps []string
	for range mounts {
		f, mp := mount(t, Options{})
		fss = append(fss, f)
		mps = append(mps, mp)
	}
	for round := range rounds {
		errs := make(chan error, mounts)
		for _, f := range fss {
			go func() {
				_, err := f.PowerCut()
				errs <- err
			}()
		}
		for range mounts {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		for i, mp := range mps {
			path := filepath.Join(mp, "f")
			if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
				t.Fatalf("round %d, mount %d after the cuts: %v", round, i, err)
			}
		}
	}
}
