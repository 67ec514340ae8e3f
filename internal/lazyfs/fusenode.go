package lazyfs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// fuseNode is one inode as go-fuse sees it, for one mount: a new mount
// (after a power cut) makes new ones. The model lives in tree and inode;
// this type only translates.
type fuseNode struct {
	fs.Inode
	t *tree
	n *inode
}

// handle is an open regular file; it exists so that go-fuse tells us when
// the file is closed (Release), which keeps an unlinked file's bytes
// alive until then.
type handle struct{}

var (
	_ fs.NodeLookuper  = (*fuseNode)(nil)
	_ fs.NodeGetattrer = (*fuseNode)(nil)
	_ fs.NodeSetattrer = (*fuseNode)(nil)
	_ fs.NodeCreater   = (*fuseNode)(nil)
	_ fs.NodeOpener    = (*fuseNode)(nil)
	_ fs.NodeReader    = (*fuseNode)(nil)
	_ fs.NodeWriter    = (*fuseNode)(nil)
	_ fs.NodeReleaser  = (*fuseNode)(nil)
	_ fs.NodeFsyncer   = (*fuseNode)(nil)
	_ fs.NodeMkdirer   = (*fuseNode)(nil)
	_ fs.NodeRmdirer   = (*fuseNode)(nil)
	_ fs.NodeUnlinker  = (*fuseNode)(nil)
	_ fs.NodeRenamer   = (*fuseNode)(nil)
	_ fs.NodeReaddirer = (*fuseNode)(nil)
	_ fs.NodeAllocater = (*fuseNode)(nil)
	_ fs.NodeStatfser  = (*fuseNode)(nil)
	_ fs.NodeOpendirer = (*fuseNode)(nil)
	_ fs.InodeEmbedder = (*fuseNode)(nil)
)

// Left to go-fuse's defaults: Lseek (SEEK_DATA and SEEK_HOLE answered from
// the size), Flush (nothing: a close makes nothing durable), Access (from
// the attributes). Xattrs are off (MountOptions.DisableXAttrs), locks stay
// with the kernel (no EnableLocks), and hard links, symlinks and special
// files are not supported.

func (f *fuseNode) newChild(ctx context.Context, c *inode, out *fuse.EntryOut) *fs.Inode {
	f.t.fillAttr(c, &out.Attr)
	mode := uint32(syscall.S_IFREG)
	if c.dir {
		mode = syscall.S_IFDIR
	}
	return f.NewInode(ctx, &fuseNode{t: f.t, n: c}, fs.StableAttr{Mode: mode, Ino: c.ino})
}

// fillAttr reports n's attributes.
func (t *tree) fillAttr(n *inode, out *fuse.Attr) {
	nlink := t.nlink(n)
	n.mu.RLock()
	defer n.mu.RUnlock()
	out.Ino = n.ino
	out.Nlink = nlink
	out.Mode = n.attr.perm
	out.Uid, out.Gid = n.attr.uid, n.attr.gid
	out.Blksize = pageSize
	if n.dir {
		out.Mode |= syscall.S_IFDIR
		out.Size = pageSize
	} else {
		out.Mode |= syscall.S_IFREG
		out.Size = uint64(n.data.size)
	}
	out.Blocks = (out.Size + 511) / 512
	out.Atime, out.Atimensec = split(n.attr.atime)
	out.Mtime, out.Mtimensec = split(n.attr.mtime)
	out.Ctime, out.Ctimensec = split(n.attr.ctime)
}

func split(ns int64) (uint64, uint32) {
	return uint64(ns / 1e9), uint32(ns % 1e9)
}

func caller(ctx context.Context) (uid, gid uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}

func (f *fuseNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	c := f.t.lookup(f.n, name)
	if c == nil {
		return nil, syscall.ENOENT
	}
	return f.newChild(ctx, c, out), 0
}

func (f *fuseNode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.t.fillAttr(f.n, &out.Attr)
	return 0
}

func (f *fuseNode) Setattr(ctx context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n := f.n
	size, setSize := in.GetSize()
	if setSize && n.dir {
		return syscall.EISDIR
	}
	now := time.Now().UnixNano()
	n.mu.Lock()
	if setSize {
		if n.data.fd < 0 {
			n.mu.Unlock()
			return syscall.ESTALE
		}
		if err := n.data.truncate(int64(size)); err != nil {
			n.mu.Unlock()
			return errno(err)
		}
		n.attr.mtime = now
	}
	if perm, ok := in.GetMode(); ok {
		n.attr.perm = perm
	}
	if uid, ok := in.GetUID(); ok {
		n.attr.uid = uid
	}
	if gid, ok := in.GetGID(); ok {
		n.attr.gid = gid
	}
	if t, ok := in.GetATime(); ok {
		n.attr.atime = t.UnixNano()
	}
	if t, ok := in.GetMTime(); ok {
		n.attr.mtime = t.UnixNano()
	}
	n.attr.ctime = now
	n.mu.Unlock()
	f.t.fillAttr(n, &out.Attr)
	return 0
}

func (f *fuseNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	uid, gid := caller(ctx)
	c, e := f.t.create(f.n, name, mode, uid, gid)
	if e != 0 {
		return nil, nil, 0, e
	}
	return f.newChild(ctx, c, out), handle{}, fuse.FOPEN_KEEP_CACHE, 0
}

// Open keeps the kernel's page cache: every change reaches the file
// through this mount's kernel, so what it caches is never stale.
func (f *fuseNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n := f.n
	n.mu.RLock()
	gone := n.data.fd < 0
	n.mu.RUnlock()
	if gone {
		return nil, 0, syscall.ESTALE
	}
	f.t.open(n)
	if flags&syscall.O_TRUNC != 0 {
		n.mu.Lock()
		err := n.data.truncate(0)
		n.attr.mtime = time.Now().UnixNano()
		n.attr.ctime = n.attr.mtime
		n.mu.Unlock()
		if err != nil {
			f.t.release(n)
			return nil, 0, errno(err)
		}
	}
	return handle{}, fuse.FOPEN_KEEP_CACHE, 0
}

func (f *fuseNode) Release(ctx context.Context, _ fs.FileHandle) syscall.Errno {
	f.t.release(f.n)
	return 0
}

func (f *fuseNode) Read(ctx context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n := f.n
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.data.fd < 0 {
		return nil, syscall.ESTALE
	}
	k, err := n.data.read(dest, off)
	if err != nil {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:k]), 0
}

func (f *fuseNode) Write(ctx context.Context, _ fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.data.fd < 0 {
		return 0, syscall.ESTALE
	}
	if err := n.data.write(data, off); err != nil {
		return 0, errno(err)
	}
	n.attr.mtime = time.Now().UnixNano()
	n.attr.ctime = n.attr.mtime
	return uint32(len(data)), 0
}

// Fsync serves fsync and fdatasync of files, and fsync of directories
// (FSYNCDIR comes here too).
func (f *fuseNode) Fsync(ctx context.Context, _ fs.FileHandle, flags uint32) syscall.Errno {
	n := f.n
	if n.dir {
		f.t.syncDir(n)
		return 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.data.fd < 0 {
		return syscall.ESTALE
	}
	if f.t.realSync {
		if err := unix.Fdatasync(n.data.fd); err != nil {
			return syscall.EIO
		}
	}
	n.data.sync()
	return 0
}

// Allocate serves fallocate: mode 0 extends the size (the store's file
// stays sparse: no space is reserved), FALLOC_FL_KEEP_SIZE changes nothing
// a power cut could lose. Punching and zeroing holes are not supported.
func (f *fuseNode) Allocate(ctx context.Context, _ fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	n := f.n
	switch mode {
	case 0:
	case unix.FALLOC_FL_KEEP_SIZE:
		return 0
	default:
		return syscall.EOPNOTSUPP
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.data.fd < 0 {
		return syscall.ESTALE
	}
	if end := int64(off + size); end > n.data.size {
		if err := n.data.truncate(end); err != nil {
			return errno(err)
		}
		n.attr.ctime = time.Now().UnixNano()
	}
	return 0
}

func (f *fuseNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	uid, gid := caller(ctx)
	c, e := f.t.mkdir(f.n, name, mode, uid, gid)
	if e != 0 {
		return nil, e
	}
	return f.newChild(ctx, c, out), 0
}

func (f *fuseNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return f.t.remove(f.n, name, true)
}

func (f *fuseNode) Unlink(ctx context.Context, name string) syscall.Errno {
	return f.t.remove(f.n, name, false)
}

func (f *fuseNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	to, ok := newParent.(*fuseNode)
	if !ok {
		return syscall.EXDEV
	}
	return f.t.rename(f.n, name, to.n, newName, flags)
}

func (f *fuseNode) Opendir(ctx context.Context) syscall.Errno {
	if !f.n.dir {
		return syscall.ENOTDIR
	}
	return 0
}

func (f *fuseNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	names, nodes := f.t.list(f.n)
	list := make([]fuse.DirEntry, len(names))
	for i, name := range names {
		mode := uint32(syscall.S_IFREG)
		if nodes[i].dir {
			mode = syscall.S_IFDIR
		}
		list[i] = fuse.DirEntry{Name: name, Mode: mode, Ino: nodes[i].ino}
	}
	return fs.NewListDirStream(list), 0
}

// Statfs reports the store's file system: that is where the bytes go.
func (f *fuseNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(f.t.store, &st); err != nil {
		return errno(err)
	}
	out.FromStatfsT(&st)
	return 0
}
