package lazyfs

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tree is the namespace: every inode, and for each directory its current
// and its durable entries. mu guards the maps, each inode's entries,
// durable, links, durableLinks and opens, and lastIno. It is taken before
// an inode's own mu, never after.
type tree struct {
	mu         sync.Mutex
	store      string // the directory of backing files, one per regular file, named by inode number
	trackFresh bool   // whether content tracks the pages a tear may keep
	realSync   bool   // whether a file's fsync also fdatasyncs its backing file
	nodes      map[uint64]*inode
	root       *inode
	lastIno    uint64
}

// inode is a file or a directory. An inode lives while it is named by a
// current or a durable entry or is open; then its backing file goes too
// (drop), so that a store which deletes what it no longer needs does not
// fill the disk.
type inode struct {
	ino uint64
	dir bool

	// Guarded by tree.mu.
	links        int // current entries naming it
	durableLinks int // durable entries naming it
	opens        int // open file handles
	entries      map[string]*inode
	durable      map[string]*inode // as of the directory's last fsync

	// mu guards attr and data.
	mu   sync.RWMutex
	attr attr
	data content // regular files only
}

// attr is what stat reports beside the size. A power cut keeps it as it
// is: the model loses bytes and names, not modes or times.
type attr struct {
	perm                uint32
	uid, gid            uint32
	atime, mtime, ctime int64 // nanoseconds since the epoch
}

func newTree(store string, trackFresh bool) *tree {
	t := &tree{store: store, trackFresh: trackFresh, nodes: make(map[uint64]*inode)}
	t.root = t.newDir(0o755, uint32(os.Getuid()), uint32(os.Getgid()))
	return t
}

func (t *tree) newDir(perm, uid, gid uint32) *inode {
	t.lastIno++
	n := &inode{
		ino:     t.lastIno,
		dir:     true,
		entries: make(map[string]*inode),
		durable: make(map[string]*inode),
		attr:    newAttr(perm, uid, gid),
	}
	t.nodes[n.ino] = n
	return n
}

func (t *tree) newFile(perm, uid, gid uint32) (*inode, error) {
	ino := t.lastIno + 1
	fd, err := unix.Open(t.backing(ino), unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	t.lastIno = ino
	n := &inode{ino: ino, attr: newAttr(perm, uid, gid), data: newContent(fd, t.trackFresh)}
	t.nodes[ino] = n
	return n, nil
}

func newAttr(perm, uid, gid uint32) attr {
	now := time.Now().UnixNano()
	return attr{perm: perm & 0o7777, uid: uid, gid: gid, atime: now, mtime: now, ctime: now}
}

func (t *tree) backing(ino uint64) string {
	return filepath.Join(t.store, strconv.FormatUint(ino, 10))
}

// unref drops n if nothing holds it any more.
func (t *tree) unref(n *inode) {
	if n.links == 0 && n.durableLinks == 0 && n.opens == 0 && n != t.root {
		t.drop(n, true)
	}
}

// drop forgets n and removes its backing file. With cascade, the inodes
// its entries held lose those references (a cut drops whole subtrees at
// once, and recounts).
func (t *tree) drop(n *inode, cascade bool) {
	delete(t.nodes, n.ino)
	if !n.dir {
		n.mu.Lock()
		if n.data.fd >= 0 {
			_ = unix.Close(n.data.fd)
			_ = unix.Unlink(t.backing(n.ino))
			n.data.fd = -1
		}
		n.data.forget()
		n.mu.Unlock()
		return
	}
	entries, durable := n.entries, n.durable
	n.entries, n.durable = map[string]*inode{}, map[string]*inode{}
	if !cascade {
		return
	}
	for _, c := range entries {
		c.links--
		t.unref(c)
	}
	for _, c := range durable {
		c.durableLinks--
		t.unref(c)
	}
}

func (t *tree) lookup(dir *inode, name string) *inode {
	t.mu.Lock()
	defer t.mu.Unlock()
	return dir.entries[name]
}

// nlink is what stat reports as the link count.
func (t *tree) nlink(n *inode) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !n.dir {
		return uint32(n.links)
	}
	k := uint32(2)
	for _, c := range n.entries {
		if c.dir {
			k++
		}
	}
	return k
}

// create makes a regular file named name in dir, open once.
func (t *tree) create(dir *inode, name string, perm, uid, gid uint32) (*inode, syscall.Errno) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The kernel asks only for names it knows are free.
	if dir.entries[name] != nil {
		return nil, syscall.EEXIST
	}
	n, err := t.newFile(perm, uid, gid)
	if err != nil {
		return nil, errno(err)
	}
	t.link(dir, name, n)
	n.opens++
	return n, 0
}

func (t *tree) mkdir(dir *inode, name string, perm, uid, gid uint32) (*inode, syscall.Errno) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if dir.entries[name] != nil {
		return nil, syscall.EEXIST
	}
	n := t.newDir(perm, uid, gid)
	t.link(dir, name, n)
	return n, 0
}

func (t *tree) link(dir *inode, name string, n *inode) {
	dir.entries[name] = n
	n.links++
	touch(dir)
}

// remove unlinks name from dir; wantDir says whether rmdir or unlink asks.
func (t *tree) remove(dir *inode, name string, wantDir bool) syscall.Errno {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := dir.entries[name]
	switch {
	case n == nil:
		return syscall.ENOENT
	case wantDir && !n.dir:
		return syscall.ENOTDIR
	case !wantDir && n.dir:
		return syscall.EISDIR
	case n.dir && len(n.entries) > 0:
		return syscall.ENOTEMPTY
	}
	delete(dir.entries, name)
	n.links--
	touch(dir)
	t.unref(n)
	return 0
}

// rename moves or swaps an entry, as rename(2) and renameat2(2) do with
// flags 0, RENAME_NOREPLACE or RENAME_EXCHANGE. The kernel has checked
// that a directory is not moved into itself.
func (t *tree) rename(from *inode, name string, to *inode, newName string, flags uint32) syscall.Errno {
	if flags&^(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE) != 0 ||
		flags == unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE {
		return syscall.EINVAL
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	src, dst := from.entries[name], to.entries[newName]
	switch {
	case src == nil:
		return syscall.ENOENT
	case flags&unix.RENAME_EXCHANGE != 0:
		if dst == nil {
			return syscall.ENOENT
		}
		from.entries[name], to.entries[newName] = dst, src
		touch(from)
		touch(to)
		return 0
	case dst != nil && flags&unix.RENAME_NOREPLACE != 0:
		return syscall.EEXIST
	case dst == src:
		return 0
	case dst != nil && src.dir && !dst.dir:
		return syscall.ENOTDIR
	case dst != nil && !src.dir && dst.dir:
		return syscall.EISDIR
	case dst != nil && dst.dir && len(dst.entries) > 0:
		return syscall.ENOTEMPTY
	}
	delete(from.entries, name)
	to.entries[newName] = src
	touch(from)
	touch(to)
	if dst != nil {
		dst.links--
		t.unref(dst)
	}
	return 0
}

// syncDir makes dir's current entries its durable ones.
func (t *tree) syncDir(dir *inode) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := dir.durable
	dir.durable = maps.Clone(dir.entries)
	for _, c := range dir.durable {
		c.durableLinks++
	}
	for _, c := range old {
		c.durableLinks--
		t.unref(c)
	}
}

// open counts a handle; release forgets it.
func (t *tree) open(n *inode) {
	t.mu.Lock()
	n.opens++
	t.mu.Unlock()
}

func (t *tree) release(n *inode) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n.opens--
	t.unref(n)
}

// list returns dir's entries in name order.
func (t *tree) list(dir *inode) (names []string, nodes []*inode) {
	t.mu.Lock()
	defer t.mu.Unlock()
	names = slices.Sorted(maps.Keys(dir.entries))
	nodes = make([]*inode, len(names))
	for i, name := range names {
		nodes[i] = dir.entries[name]
	}
	return names, nodes
}

// touch notes that a directory's entries changed.
func touch(dir *inode) {
	now := time.Now().UnixNano()
	dir.mu.Lock()
	dir.attr.mtime, dir.attr.ctime = now, now
	dir.mu.Unlock()
}

// errno turns an error from the backing store into what a FUSE reply
// carries.
func errno(err error) syscall.Errno {
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
