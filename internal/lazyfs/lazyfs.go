package lazyfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Errors returned by FS.
var (
	// ErrBusy means a process still uses the mount (an open file, a
	// working directory), so it cannot be unmounted: stop the processes
	// first. Nothing was lost.
	ErrBusy = errors.New("lazyfs: mount in use")
	// ErrUnmounted means Unmount was called before.
	ErrUnmounted = errors.New("lazyfs: unmounted")
	// ErrStoreNotEmpty means Mount was given a store directory with files
	// in it: the state of a lazyfs lives in the memory of its process, so
	// a store cannot be mounted again.
	ErrStoreNotEmpty = errors.New("lazyfs: store directory is not empty")
)

// Options configure a mount.
type Options struct {
	// Torn makes PowerCut tear one unsynced page: of one page written since
	// its file's last fsync, chosen at random, a random number of leading
	// 512-byte sectors keep the new bytes and the rest revert.
	Torn bool
	// Seed seeds the choice of torn page. The same seed and the same
	// sequence of operations tear the same sectors.
	Seed uint64
	// RealSync makes a file's fsync also fdatasync its backing file, so
	// that an fsync takes as long as the disk under the store makes it
	// (what is durable is still decided by the model, not by the disk).
	RealSync bool
}

// FS is a mounted lazy file system.
type FS struct {
	mountpoint   string
	store        string
	storeCreated bool
	tree         *tree

	// mu serializes PowerCut, Wipe and Unmount, and guards server and rng.
	mu     sync.Mutex
	server *fuse.Server // nil once unmounted for good
	rng    *rand.Rand   // nil unless Options.Torn
}

// Mount mounts a new, empty lazy file system at mountpoint, an existing
// directory. store is a directory on a real file system for the files'
// bytes (created if needed, and it must be empty); everything else lives
// in this process's memory. Mount needs root and /dev/fuse.
func Mount(mountpoint, store string, opts Options) (*FS, error) {
	if st, err := os.Stat(mountpoint); err != nil {
		return nil, fmt.Errorf("lazyfs: mount point: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("lazyfs: mount point %s is not a directory", mountpoint)
	}
	_, err := os.Stat(store)
	created := errors.Is(err, os.ErrNotExist)
	if err := os.MkdirAll(store, 0o700); err != nil {
		return nil, fmt.Errorf("lazyfs: store: %w", err)
	}
	if ents, err := os.ReadDir(store); err != nil {
		return nil, fmt.Errorf("lazyfs: store: %w", err)
	} else if len(ents) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrStoreNotEmpty, store)
	}
	f := &FS{mountpoint: mountpoint, store: store, storeCreated: created, tree: newTree(store, opts.Torn)}
	f.tree.realSync = opts.RealSync
	if opts.Torn {
		f.rng = rand.New(rand.NewPCG(opts.Seed, 0x6c617a796673))
	}
	if err := f.mount(); err != nil {
		if created {
			_ = os.Remove(store)
		}
		return nil, err
	}
	return f, nil
}

// The kernel caches entries and attributes this long. Only this mount's
// kernel changes the namespace, and each power cut mounts anew, so the
// cache is never stale; the timeout only bounds how long it is trusted.
const cacheTimeout = time.Second

// devMu is held from an unmount until its connection is aborted, and while
// mounting: the kernel names a FUSE connection by the device number of its
// mount, which a new mount may take as soon as the old one is gone, and
// aborting by number must not hit another file system of this process that
// mounted in between. (Another process that mounts a FUSE file system in
// that window of microseconds could still be hit.)
var devMu sync.Mutex

func (f *FS) mount() error {
	devMu.Lock()
	defer devMu.Unlock()
	timeout := cacheTimeout
	root := &fuseNode{t: f.tree, n: f.tree.root}
	server, err := fs.Mount(f.mountpoint, root, &fs.Options{
		MountOptions: fuse.MountOptions{
			DirectMount:       true,
			DirectMountStrict: true, // no fusermount: Mount needs root
			FsName:            "lazyfs",
			Name:              "lazyfs",
			// Without xattrs the kernel stops asking for
			// security.capability before every write.
			DisableXAttrs: true,
			// The page cache is kept across opens and never
			// invalidated on an mtime change: see cacheTimeout.
			ExplicitDataCacheControl: true,
		},
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
	})
	if err != nil {
		return fmt.Errorf("lazyfs: mounting %s: %w", f.mountpoint, err)
	}
	f.server = server
	return nil
}

// unmount unmounts, failing with ErrBusy if a process uses the mount.
//
// The kernel ends the FUSE connection, and with it the server's loops, only
// once no mount namespace holds a copy of the mount. A process started in
// a new mount namespace while the mount existed (ip netns exec does that)
// keeps a copy that this unmount does not reach, so after unmounting here
// the connection is aborted outright (fusectl): the copies elsewhere go
// dead, and the server's loops end.
func (f *FS) unmount() error {
	if f.server == nil {
		return ErrUnmounted
	}
	if err := f.unmountAndAbort(); err != nil {
		return err
	}
	f.server = nil
	return nil
}

// unmountAndAbort unmounts and waits for the server's loops to end. If
// they have not ended soon, another mount namespace holds a copy of the
// mount, which keeps the connection, and with it its device number, alive:
// then the connection is aborted by that number. (Aborting at once would
// race: without copies the number is free again as soon as the unmount
// returns, and another process's new mount may have it.)
func (f *FS) unmountAndAbort() error {
	devMu.Lock()
	defer devMu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Stat(f.mountpoint, &st); err != nil {
		return fmt.Errorf("lazyfs: %w", err)
	}
	if err := syscall.Unmount(f.mountpoint, 0); err != nil {
		if errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("%w: %s: stop the processes that use it first", ErrBusy, f.mountpoint)
		}
		return fmt.Errorf("lazyfs: unmounting %s: %w", f.mountpoint, err)
	}
	done := make(chan struct{})
	go func() {
		f.server.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(connectionGrace):
	}
	if err := abortConnection(st.Dev); err != nil {
		return err
	}
	<-done
	return nil
}

// connectionGrace is how long an unmounted server's loops may take to end
// on their own before the connection is taken to be held elsewhere.
const connectionGrace = 200 * time.Millisecond

// fusectl is where the kernel lists FUSE connections.
const fusectl = "/sys/fs/fuse/connections"

// abortConnection aborts the FUSE connection of the file system whose
// stat device number is dev. One that is gone already is fine.
func abortConnection(dev uint64) error {
	if _, err := os.Stat(fusectl + "/"); err != nil {
		return fmt.Errorf("lazyfs: %s: %w", fusectl, err)
	}
	var root, ctl syscall.Stat_t
	if err := syscall.Stat("/sys/fs/fuse", &root); err == nil {
		if err := syscall.Stat(fusectl, &ctl); err == nil && ctl.Dev == root.Dev {
			if err := syscall.Mount("fusectl", fusectl, "fusectl", 0, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("lazyfs: mounting fusectl on %s: %w", fusectl, err)
			}
		}
	}
	// The kernel names a connection by its internal device number.
	major, minor := unix.Major(dev), unix.Minor(dev)
	name := fmt.Sprintf("%s/%d/abort", fusectl, major<<20|minor)
	err := os.WriteFile(name, []byte("1"), 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lazyfs: aborting the connection: %w", err)
	}
	return nil
}

// PowerCut simulates a power failure and a reboot: it unmounts, throws
// away everything that was not made durable (see the package doc) and
// mounts the same file system again at the same place. No process may be
// using the mount: it fails with ErrBusy otherwise, and loses nothing.
func (f *FS) PowerCut() (Report, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.unmount(); err != nil {
		return Report{}, err
	}
	r, err := f.tree.cut(f.rng)
	if merr := f.mount(); merr != nil {
		err = errors.Join(err, merr)
	}
	return r, err
}

// Wipe simulates a disk replaced by a new one: every file and directory
// is gone, durably. Like PowerCut it remounts, and no process may be using
// the mount.
func (f *FS) Wipe() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.unmount(); err != nil {
		return err
	}
	f.tree.wipe()
	return f.mount()
}

// Unmount unmounts for good and removes the store's files (and the store,
// if Mount created it). No process may be using the mount.
func (f *FS) Unmount() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.unmount(); err != nil {
		return err
	}
	f.tree.wipe()
	if f.storeCreated {
		if err := os.Remove(f.store); err != nil {
			return fmt.Errorf("lazyfs: removing store: %w", err)
		}
	}
	return nil
}
