// Package lazyfs is a FUSE file system that loses what was not made
// durable when the power is cut, as Jepsen's LazyFS does. The fault
// campaign runs each fencerd on one, kills it, calls PowerCut and starts it
// again on the same directory: what fencerd finds is what a disk would
// have kept, under the strictest reading of POSIX that real stores rely on.
//
// # The model
//
// A file's bytes are durable once the file is fsynced (fsync or
// fdatasync), a name once the directory that holds it is fsynced. Nothing
// else makes anything durable: not close, not rename, not an fsync of the
// parent's parent. At a power cut:
//
//   - every file goes back to its bytes and size as of its last fsync
//     (overwrites undone, appends and truncations reverted);
//   - every directory goes back to its entries as of its last fsync (empty
//     if it never had one: the root starts empty at Mount);
//   - what the root no longer reaches through those entries is gone.
//
// So a file created and fsynced in a directory that was never fsynced is
// gone; a file unlinked or renamed away from a directory that was not
// fsynced afterwards comes back, with its durable bytes; a directory
// renamed into place whose parent was fsynced but which was never fsynced
// itself comes back empty (hashicorp/raft's FileSnapshotStore leaves its
// snapshot directories so; fencer's durableSnapshots fsyncs them). A file
// renamed between two directories of which only the destination was
// fsynced comes back under both names, as hard links: the model keeps each
// directory's durability apart, as a file system without a journal would.
// A directory cannot have two names; the first found, breadth first from
// the root in name order, wins.
//
// With Options.Torn, one page written since its file's last fsync is
// also torn: its first k sectors (512 bytes; 0 < k < sectors in the page)
// keep their new bytes and the rest revert, as when the power fails in the
// middle of a disk's write of a page. The page and k are drawn from a
// generator seeded by Options.Seed, so a seed and a sequence of operations
// replay the same tear. A torn page past the durable size extends the file
// to the end of the sectors kept.
//
// Modes, owners and times are not modelled: they survive a cut as they
// were. Locks (flock, fcntl) are the kernel's, and go with the mount.
//
// # How it is built
//
// The namespace lives in memory (tree): each directory has its current and
// its durable entries, name to inode. The bytes of each regular file live
// in a backing file in the store directory, named by inode number, read
// and written with pread and pwrite; the backing file always holds the
// current bytes. Each file also has a durable size and an undo map from
// page index to the page's bytes as of the last fsync, filled the first
// time a page below the durable size is overwritten or truncated away
// since the fsync (content). An fsync clears the map; a power cut writes it
// back and truncates to the durable size. The cost of an fsynced append is
// thus one copy of the page or two it touches, from a pool, and the
// memory held is bounded by what was overwritten since the last fsync:
// no whole file is ever copied.
//
// An inode lives while a current or a durable entry names it or a handle
// has it open; then its backing file is deleted, so that a WAL that deletes
// old segments (and fsyncs their directory) does not fill the store. The
// store need not be durable itself: lazyfs never fsyncs it.
//
// One mutex guards the namespace (tree.mu), one per inode its bytes and
// attributes (inode.mu); reads and writes of different files do not meet.
//
// The kernel sees the file system through go-fuse's fs package, without
// writeback caching: each write(2) is a FUSE write that reaches the model
// before it returns, so a process killed with SIGKILL has lost nothing
// that a power cut would not take. The page cache, entries and attributes
// are cached (KEEP_CACHE, explicit invalidation, one-second timeouts):
// every change goes through this mount's kernel, so nothing cached is
// stale, and a power cut unmounts and mounts anew, which starts the caches
// afresh. Mapping files into memory works (bbolt maps its file read-only).
//
// PowerCut needs the processes that used the mount gone: unmounting a
// mount in use fails with ErrBusy rather than detaching it lazily, which
// would let a live process write on after the "power cut". A process in
// another mount namespace (ip netns exec starts each in one) holds a copy
// of the mount that this unmount neither sees nor removes, so ErrBusy
// cannot speak for it; PowerCut aborts the FUSE connection after
// unmounting, and such a process reads and writes nothing more (ENOTCONN).
//
// The process that mounts must not map files of its own mount into memory
// (bbolt does, to read): a page fault it has to serve itself can deadlock
// in the kernel. Run the stores in other processes, as fencerd runs; the
// tests do.
//
// # Supported
//
// Lookup, getattr, setattr (size, mode, owner, times; a size change goes
// through the undo capture), create, open (O_TRUNC too), read, write,
// flush, release, fsync and fdatasync of files and directories, mkdir,
// rmdir, unlink, rename (plain, RENAME_NOREPLACE, RENAME_EXCHANGE),
// readdir, fallocate (mode 0 extends the size, leaving the store's file
// sparse; FALLOC_FL_KEEP_SIZE does nothing), lseek with SEEK_DATA and
// SEEK_HOLE, statfs (the store's). Not supported: hard links, symlinks,
// special files, xattrs, punching or zeroing holes, O_TMPFILE.
//
// Mount needs root and /dev/fuse; it mounts without fusermount.
package lazyfs
