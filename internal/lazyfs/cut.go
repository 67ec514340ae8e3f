package lazyfs

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
)

// Report says what a power cut threw away.
type Report struct {
	// Files counts the regular files whose bytes went back to their last
	// fsync (among those that kept a name).
	Files int
	// Bytes counts the bytes that went: pages overwritten since the fsync
	// counted whole, plus everything past the durable size.
	Bytes int
	// Entries counts the directory entries that went back to their
	// directory's last fsync: names created, removed or renamed since.
	Entries int
	// Torn is the page a tear half wrote, "path@offset+N sectors" (the
	// first N sectors from offset kept their new bytes), or "".
	Torn string
}

// String says it in a line.
func (r Report) String() string {
	if r.Files == 0 && r.Entries == 0 && r.Torn == "" {
		return "nothing lost"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d files reverted (%d bytes), %d directory entries reverted", r.Files, r.Bytes, r.Entries)
	if r.Torn != "" {
		fmt.Fprintf(&b, ", torn %s", r.Torn)
	}
	return b.String()
}

// cut is the power cut, done to the model while nothing is mounted:
//
//  1. What survives is what the root reaches through durable entries. A
//     directory named by more than one durable entry (moved, and both old
//     and new parent fsynced at different times) keeps the first name
//     found, breadth first in name order; a file keeps all its names, as
//     hard links.
//  2. With rng, one page written since its file's fsync is torn.
//  3. Files go back to their durable bytes, directories to their durable
//     entries; everything else is dropped, and the reference counts are
//     made again from the entries left.
func (t *tree) cut(rng *rand.Rand) (Report, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var r Report

	paths := map[*inode]string{t.root: ""}
	for queue := []*inode{t.root}; len(queue) > 0; queue = queue[1:] {
		d := queue[0]
		for _, name := range slices.Sorted(maps.Keys(d.durable)) {
			c := d.durable[name]
			if _, seen := paths[c]; seen {
				if c.dir {
					delete(d.durable, name)
				}
				continue
			}
			paths[c] = path.Join(paths[d], name)
			if c.dir {
				queue = append(queue, c)
			}
		}
	}

	var torn *inode
	var tr tear
	if rng != nil {
		torn, tr = t.pickTear(rng, paths)
		if torn != nil {
			r.Torn = fmt.Sprintf("%s@%d+%d sectors", paths[torn], tr.off, tr.n/sectorSize)
		}
	}

	var firstErr error
	for n := range paths {
		if n.dir {
			for name := range n.entries {
				if n.durable[name] != n.entries[name] {
					r.Entries++
				}
			}
			for name := range n.durable {
				if n.entries[name] == nil {
					r.Entries++
				}
			}
			n.entries = maps.Clone(n.durable)
			continue
		}
		var tp *tear
		if n == torn {
			tp = &tr
		}
		n.mu.Lock()
		changed, lost, err := n.data.revert(tp)
		n.mu.Unlock()
		if changed {
			r.Files++
			r.Bytes += int(lost)
		}
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("lazyfs: reverting %s: %w", paths[n], err)
		}
	}

	for _, n := range t.nodes {
		if _, ok := paths[n]; !ok {
			t.drop(n, false)
		}
	}
	for n := range paths {
		n.links, n.durableLinks, n.opens = 0, 0, 0
	}
	for n := range paths {
		for _, c := range n.durable {
			c.links++
			c.durableLinks++
		}
	}
	return r, firstErr
}

// pickTear chooses the torn page among the surviving files' pages written
// since their last fsync, in an order that depends on the history of the
// file system only, so that a seed replays the same tear.
func (t *tree) pickTear(rng *rand.Rand, paths map[*inode]string) (*inode, tear) {
	type page struct {
		n       *inode
		page    int64
		sectors int
	}
	var pages []page
	for n := range paths {
		if n.dir {
			continue
		}
		n.mu.RLock()
		n.data.tearable(func(p int64, sectors int) { pages = append(pages, page{n, p, sectors}) })
		n.mu.RUnlock()
	}
	if len(pages) == 0 {
		return nil, tear{}
	}
	slices.SortFunc(pages, func(a, b page) int {
		return cmp.Or(cmp.Compare(a.n.ino, b.n.ino), cmp.Compare(a.page, b.page))
	})
	p := pages[rng.IntN(len(pages))]
	return p.n, tearAt(rng, p.page, p.sectors)
}

// wipe forgets everything: a new, empty disk.
func (t *tree) wipe() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.nodes {
		if n != t.root {
			t.drop(n, false)
		}
	}
	t.root.entries = map[string]*inode{}
	t.root.durable = map[string]*inode{}
}
