package lazyfs

import (
	"io"
	"math/rand/v2"
	"sync"

	"golang.org/x/sys/unix"
)

// The units of loss: undo is kept per page, and a torn page keeps whole
// sectors, as a disk writes them.
const (
	pageSize   = 4096
	sectorSize = 512
)

// pagePool recycles undo pages: a WAL that appends and fsyncs captures a
// page or two per append, and they all go back at the next fsync.
var pagePool = sync.Pool{New: func() any { return new([pageSize]byte) }}

// content is a regular file's bytes and what a power cut would make of
// them. The current bytes are the backing file's, whose length is always
// size. The durable bytes are the backing file's too, except for the pages
// in undo, which hold the durable bytes of pages changed since the last
// fsync, and except that only the first durableSize bytes are durable.
//
// Invariant: a page that starts below durableSize and is not in undo holds
// its durable bytes in the backing file, all of them (size never drops
// below the durable end of such a page: truncation captures first).
//
// The inode's mu guards content.
type content struct {
	fd          int // the backing file; -1 once the inode is dropped
	size        int64
	durableSize int64
	undo        map[int64]*[pageSize]byte
	// fresh holds the pages wholly past durableSize written since the last
	// fsync, which a tear may keep; nil when tears are off.
	fresh map[int64]struct{}
}

func newContent(fd int, trackFresh bool) content {
	c := content{fd: fd, undo: make(map[int64]*[pageSize]byte)}
	if trackFresh {
		c.fresh = make(map[int64]struct{})
	}
	return c
}

// durableLen is how many bytes of page p are durable.
func (c *content) durableLen(p int64) int {
	return int(min(pageSize, c.durableSize-p*pageSize))
}

// capture saves the durable bytes of pages first..last that are about to
// change, unless they are saved already or hold nothing durable.
func (c *content) capture(first, last int64) error {
	if c.durableSize == 0 {
		return nil
	}
	last = min(last, (c.durableSize-1)/pageSize)
	for p := first; p <= last; p++ {
		if _, ok := c.undo[p]; ok {
			continue
		}
		buf := pagePool.Get().(*[pageSize]byte)
		if err := preadFull(c.fd, buf[:c.durableLen(p)], p*pageSize); err != nil {
			pagePool.Put(buf)
			return err
		}
		c.undo[p] = buf
	}
	return nil
}

func (c *content) read(dest []byte, off int64) (int, error) {
	if off >= c.size {
		return 0, nil
	}
	dest = dest[:min(int64(len(dest)), c.size-off)]
	return len(dest), preadFull(c.fd, dest, off)
}

func (c *content) write(data []byte, off int64) error {
	if len(data) == 0 {
		return nil
	}
	end := off + int64(len(data))
	if err := c.capture(off/pageSize, (end-1)/pageSize); err != nil {
		return err
	}
	if err := pwriteFull(c.fd, data, off); err != nil {
		// The bytes may be partly written, and the size is what the
		// backing file says: keep the invariant that they agree.
		c.resync()
		return err
	}
	c.size = max(c.size, end)
	if c.fresh != nil {
		for p := max(off, c.durableSize+pageSize-1) / pageSize; p <= (end-1)/pageSize; p++ {
			c.fresh[p] = struct{}{}
		}
	}
	return nil
}

// truncate sets the size, capturing the durable bytes it cuts off.
func (c *content) truncate(size int64) error {
	if size < c.durableSize {
		if err := c.capture(size/pageSize, (c.durableSize-1)/pageSize); err != nil {
			return err
		}
	}
	if err := unix.Ftruncate(c.fd, size); err != nil {
		return err
	}
	if c.fresh != nil && size < c.size {
		for p := range c.fresh {
			if p*pageSize >= size {
				delete(c.fresh, p)
			}
		}
	}
	c.size = size
	return nil
}

// resync sets size from the backing file after a failed write.
func (c *content) resync() {
	var st unix.Stat_t
	if unix.Fstat(c.fd, &st) == nil {
		c.size = st.Size
	}
}

// sync makes the current bytes durable: fsync and fdatasync alike, since
// fdatasync must persist a size change for the data to be read back.
func (c *content) sync() {
	c.forget()
	c.durableSize = c.size
}

// forget drops the undo pages and the fresh set.
func (c *content) forget() {
	for _, buf := range c.undo {
		pagePool.Put(buf)
	}
	clear(c.undo)
	clear(c.fresh)
}

// tear names one page a power cut half writes: of the bytes in
// [off, off+n) the new ones stay, the rest of the page reverts.
type tear struct {
	off int64
	n   int
}

// tearable calls visit, in no particular order, for each page written (or
// cut off) since the last fsync that still has at least two sectors of
// current bytes: the pages a power cut could tear.
func (c *content) tearable(visit func(page int64, sectors int)) {
	each := func(p int64) {
		if p*pageSize >= c.size {
			return
		}
		extent := min(pageSize, c.size-p*pageSize)
		if sectors := int((extent + sectorSize - 1) / sectorSize); sectors >= 2 {
			visit(p, sectors)
		}
	}
	for p := range c.undo {
		each(p)
	}
	for p := range c.fresh {
		each(p)
	}
}

// tearAt draws how many leading sectors of a page keep their new bytes:
// at least one, and not all.
func tearAt(rng *rand.Rand, page int64, sectors int) tear {
	return tear{off: page * pageSize, n: (1 + rng.IntN(sectors-1)) * sectorSize}
}

// revert is the power cut: the file goes back to its durable bytes,
// except for the new bytes a tear keeps (t may be nil). It reports whether
// anything changed and how many bytes went (overwritten pages counted
// whole, plus everything past the durable size).
func (c *content) revert(t *tear) (changed bool, lost int64, err error) {
	for p := range c.undo {
		lost += int64(c.durableLen(p))
	}
	lost += max(0, c.size-c.durableSize)
	changed = len(c.undo) > 0 || c.size != c.durableSize
	var kept []byte
	if t != nil {
		kept = make([]byte, t.n)
		if err := preadFull(c.fd, kept, t.off); err != nil {
			return changed, lost, err
		}
	}
	if err := unix.Ftruncate(c.fd, c.durableSize); err != nil {
		return changed, lost, err
	}
	for p, buf := range c.undo {
		if err := pwriteFull(c.fd, buf[:c.durableLen(p)], p*pageSize); err != nil {
			return changed, lost, err
		}
	}
	c.forget()
	c.size = c.durableSize
	if kept != nil {
		if err := pwriteFull(c.fd, kept, t.off); err != nil {
			return changed, lost, err
		}
		c.size = max(c.size, t.off+int64(len(kept)))
		c.durableSize = c.size
	}
	return changed, lost, nil
}

func preadFull(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pread(fd, b, off)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

func pwriteFull(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pwrite(fd, b, off)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return err
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}
