package server

import (
	"io"
	"log/slog"
	"strconv"
	"testing"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
)

// BenchmarkApplyWatched is the applier's share of one acquire+release pair
// (the table, the grants, the metrics and the watch hub, as a node applies
// an entry) with no watch, with 1000 watches of other keys, and with
// prefix watches that match none of the keys applied: what a watch costs
// the lock path. Reported per pair.
func BenchmarkApplyWatched(b *testing.B) {
	for _, bc := range []struct {
		name           string
		keys, prefixes int
	}{{"none", 0, 0}, {"keys=1000", 1000, 0}, {"prefixes=1", 0, 1}, {"prefixes=256", 0, 256}} {
		b.Run(bc.name, func(b *testing.B) {
			table := fsm.New()
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			hub := newBenchHub(table)
			a := &applier{table: table, grants: newGrants(table, log, nil, 1<<30), metrics: newMetrics(), watches: hub}
			for i := range bc.keys {
				w, err := hub.watch("other-"+strconv.Itoa(i), 0, false)
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
			}
			for i := range bc.prefixes {
				w, err := benchPrefixWatch(hub, "other-"+strconv.Itoa(i)+":")
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
			}
			keys := make([]string, 1024)
			acq := make([][]byte, len(keys))
			rel := make([][]byte, len(keys))
			for i := range keys {
				k := "bench-" + strconv.Itoa(i)
				rel[i] = fsm.Command{Op: fsm.OpRelease, Key: k, Owner: "owner-" + k, Redis: true}.Encode(nil)
				acq[i] = fsm.Command{Op: fsm.OpAcquire, Key: k, Owner: "owner-" + k, TTL: 10000, Redis: true}.Encode(nil)
			}
			var l raft.Log
			l.Type = raft.LogCommand
			var index uint64
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				j := i % len(keys)
				index++
				l.Index, l.Data = index, acq[j]
				if r := a.Apply(&l).(*fsm.Result); r.Code != fsm.Granted {
					b.Fatalf("acquire: %v", r.Code)
				}
				index++
				l.Index, l.Data = index, rel[j]
				if r := a.Apply(&l).(*fsm.Result); r.Code != fsm.Released {
					b.Fatalf("release: %v", r.Code)
				}
			}
		})
	}
}

func newBenchHub(table *fsm.Table) *watchHub { return newWatchHub(table, 65536, 65536, 256) }

func benchPrefixWatch(h *watchHub, p string) (*Watch, error) { return h.watchPrefix(p, 0, false) }
