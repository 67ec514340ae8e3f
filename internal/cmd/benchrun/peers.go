package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/fencerlock/fencer/internal/bench"
)

func numCPU() int { return runtime.NumCPU() }

// peerbenchFiles are the files of the peerbench checkout (-peerbench) that
// a run needs.
var peerbenchFiles = []string{"go.mod", "go.sum", "run-peers.sh"}

// ownerPatch makes peerbench's fencer target use a fresh owner per acquire.
// Its Locker keeps one owner per client, and fencer refuses an owner's
// acquire of a key whose release by that owner it remembers (release
// memory, docs/protocol.md, Safe retries), so every re-acquire would fail.
var ownerPatch = struct{ find, replace string }{
	find: "func (l *fencerLocker) Acquire(ctx context.Context, name string, ttl time.Duration) (uint64, error) {\n",
	replace: "func (l *fencerLocker) Acquire(ctx context.Context, name string, ttl time.Duration) (uint64, error) {\n" +
		"\tl.owner = \"pb-\" + randHex(8) // patched by fencer's benchrun: a fresh owner per acquire\n",
}

// copyPeerbench copies peerbench's sources into dst and patches its fencer
// target. The original directory is never written.
func copyPeerbench(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("peerbench: %w (set PEERBENCH to its directory)", err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	patched := false
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, ".go") || contains(peerbenchFiles, name)) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if name == "fencer.go" {
			if !bytes.Contains(b, []byte(ownerPatch.find)) {
				return errors.New("peerbench: fencer.go no longer has the Acquire this patch expects; update ownerPatch in internal/cmd/benchrun")
			}
			b = bytes.Replace(b, []byte(ownerPatch.find), []byte(ownerPatch.replace), 1)
			patched = true
		}
		mode := os.FileMode(0o644)
		if name == "run-peers.sh" {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, mode); err != nil {
			return err
		}
	}
	if !patched {
		return errors.New("peerbench: no fencer.go to patch")
	}
	return nil
}

// renamePeerFencer renames peerbench's own fencer targets (in
// PEER_TARGETS, a cross-check of this harness) to "peerbench:fencer" and
// "peerbench:fencer-1", so that they stand apart from fencer bench's rows.
func renamePeerFencer(line []byte) []byte {
	var m map[string]any
	if json.Unmarshal(line, &m) != nil {
		return line
	}
	t, _ := m["target"].(string)
	if !strings.HasPrefix(t, "fencer") {
		return line
	}
	m["target"] = "peerbench:" + t
	b, err := json.Marshal(m)
	if err != nil {
		return line
	}
	return b
}

// peerWorkloads returns the workloads of wls the peers run (bench.Workload's
// Peers: the plain lock's; the peers have no read-write lock or semaphore
// of Redis or etcd).
func peerWorkloads(wls []string) []string {
	var out []string
	for _, wl := range wls {
		if w, ok := bench.LookupWorkload(wl); ok && w.Peers {
			out = append(out, wl)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// runPeers runs the patched copy of peerbench's run-peers.sh once per
// client count and records its JSON lines. run-peers.sh starts and stops its
// own servers; stopping it (SIGTERM) makes it stop them.
func runPeers(ctx context.Context, o options, procs *bench.Procs, out *recorder, work string) error {
	if len(peerWorkloads(o.workloads)) == 0 {
		logf("peers: none of the workloads %v is a plain lock's; nothing to compare", o.workloads)
		return nil
	}
	dir := filepath.Join(work, "peerbench")
	if err := copyPeerbench(o.peerbench, dir); err != nil {
		return err
	}
	fencerd, err := filepath.Abs(filepath.Join(o.binDir, "fencerd"))
	if err != nil {
		return err
	}
	var errs []error
	for i, clients := range o.clients {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logf("== peers (%s): clients=%d", o.peerTargets, clients)
		skipProbes := "1"
		if i == 0 {
			skipProbes = "0"
		}
		env := []string{
			"TARGETS=" + o.peerTargets,
			"WORKLOADS=" + strings.Join(peerWorkloads(o.workloads), " "),
			"CLIENTS=" + strconv.Itoa(clients),
			"KEYS=1",
			"DURATION=" + o.duration.String(),
			"WARMUP=" + o.warmup.String(),
			"BASE_DIR=" + work,
			"RESULTS=" + filepath.Join(work, "peers-"+strconv.Itoa(clients)+".jsonl"),
			"SKIP_PROBES=" + skipProbes,
			"FENCERD=" + fencerd,
		}
		p, err := procs.StartEnv("run-peers.sh", dir, "-", true, env, filepath.Join(dir, "run-peers.sh"))
		if err != nil {
			return err
		}
		// On Ctrl-C the script gets SIGTERM and stops its servers itself.
		unwatch := context.AfterFunc(ctx, func() { p.Stop(bench.StopGrace) })
		for {
			line, err := p.Stdout.ReadBytes('\n')
			if line = bytes.TrimSpace(line); len(line) > 0 && line[0] == '{' {
				out.line(renamePeerFencer(line))
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					errs = append(errs, err)
				}
				break
			}
		}
		<-p.Exited()
		unwatch()
		procs.StopSome(bench.StopGrace, p)
		if st := p.State(); st != "exit status 0" {
			errs = append(errs, fmt.Errorf("run-peers.sh (clients=%d): %s", clients, st))
		}
	}
	return errors.Join(errs...)
}
