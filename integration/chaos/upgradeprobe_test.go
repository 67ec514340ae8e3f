//go:build linux

package chaos

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What the rolling upgrade (upgrade_test.go) reads off the nodes: INFO's
// format level, the snapshots in their logs, the first index their Raft
// log still holds.

// info returns node i's INFO server fields.
func (c *cluster) info(i int) (map[string]string, error) {
	v, err := c.call(i, adminTimeout, "INFO", "server")
	if err != nil {
		return nil, err
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("INFO answered %#v", v)
	}
	f := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			f[k] = val
		}
	}
	return f, nil
}

// snapshotIndexRE finds the index in Raft's "snapshot complete up to" line.
var snapshotIndexRE = regexp.MustCompile(`snapshot complete up to\b.*? index=(\d+)`)

// snapshotIndexes returns the indexes of the snapshots the node took, in
// the order of its logs.
func (n *node) snapshotIndexes() []uint64 {
	n.mu.Lock()
	logs := append([]string(nil), n.logs...)
	n.mu.Unlock()
	var out []uint64
	for _, path := range logs {
		for _, m := range snapshotIndexRE.FindAllStringSubmatch(readFile(path), -1) {
			if v, err := strconv.ParseUint(m[1], 10, 64); err == nil {
				out = append(out, v)
			}
		}
	}
	return out
}

// lastSnapshotIndex returns the index of the node's newest snapshot, or 0.
func (n *node) lastSnapshotIndex() uint64 {
	var top uint64
	for _, v := range n.snapshotIndexes() {
		top = max(top, v)
	}
	return top
}

// snapshotsAfter counts the node's snapshots past index from.
func (n *node) snapshotsAfter(from uint64) int {
	k := 0
	for _, v := range n.snapshotIndexes() {
		if v > from {
			k++
		}
	}
	return k
}

// firstLogIndex returns the first index the node's Raft log still holds:
// the smallest base index of its segment files (raft-wal names them
// BASEINDEX-ID.wal, and deletes a segment once compaction passed its end).
func (n *node) firstLogIndex() (uint64, error) {
	files, err := filepath.Glob(filepath.Join(n.dataDir, "wal", "*.wal"))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("%s: no Raft log segments in %s (%v)", n.id, n.dataDir, err)
	}
	var first uint64
	for i, f := range files {
		base, _, _ := strings.Cut(filepath.Base(f), "-")
		v, err := strconv.ParseUint(base, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: segment file %s: %v", n.id, f, err)
		}
		if i == 0 || v < first {
			first = v
		}
	}
	return first, nil
}

// lastLogPath returns the log file of the node's latest process.
func (n *node) lastLogPath() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.logs) == 0 {
		return ""
	}
	return n.logs[len(n.logs)-1]
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// formatWatch polls every running node's INFO for fencer_format_in_use
// through the upgrade: a node of this build must report it, and must not
// report level 1 while a member runs the baseline.
type formatWatch struct {
	c    *cluster
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	mu     sync.Mutex
	old    map[int]bool // the members that run the baseline
	polled int
	zeros  int // samples at level 0 while an old node was a member
	errs   []string
}

func newFormatWatch(c *cluster, n int) *formatWatch {
	fw := &formatWatch{c: c, done: make(chan struct{}), old: make(map[int]bool)}
	for i := range n {
		fw.old[i] = true
	}
	return fw
}

// upgraded says node i is about to run this build.
func (fw *formatWatch) upgraded(i int) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	delete(fw.old, i)
}

// start polls until stop.
func (fw *formatWatch) start() {
	fw.wg.Add(1)
	go func() {
		defer fw.wg.Done()
		fw.run()
	}()
}

func (fw *formatWatch) run() {
	missing, early := make(map[int]bool), make(map[int]bool)
	for {
		select {
		case <-fw.done:
			return
		case <-time.After(200 * time.Millisecond):
		}
		for i, n := range fw.c.nodes {
			n.mu.Lock()
			current := n.bin == fencerdBin
			n.mu.Unlock()
			if !current || !n.running() {
				continue
			}
			f, err := fw.c.info(i)
			if err != nil {
				continue
			}
			fw.mu.Lock()
			fw.polled++
			level, ok := f["fencer_format_in_use"]
			switch {
			case !ok && !missing[i]:
				missing[i] = true
				fw.errs = append(fw.errs, fmt.Sprintf("%s runs this build (%.7s) and its INFO has no fencer_format_in_use", n.id, f["fencer_commit"]))
			case ok && level == "0" && len(fw.old) > 0:
				fw.zeros++
			case ok && level != "0" && len(fw.old) > 0 && !early[i]:
				early[i] = true
				fw.errs = append(fw.errs, fmt.Sprintf("%s reported fencer_format_in_use:%s while %d member(s) ran the baseline", n.id, level, len(fw.old)))
			}
			fw.mu.Unlock()
		}
	}
}

// stop ends the polling and waits for it.
func (fw *formatWatch) stop() {
	fw.once.Do(func() { close(fw.done) })
	fw.wg.Wait()
}

func (fw *formatWatch) samples() int {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.polled
}

func (fw *formatWatch) zeroWithOld() int {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.zeros
}

func (fw *formatWatch) errors() []string {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return append([]string(nil), fw.errs...)
}
