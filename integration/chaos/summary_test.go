//go:build linux

package chaos

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// newRand returns the nemesis's generator for seed.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6e656d65736973)) }

// summary renders the run's figures as tables.
func (r *report) summary() string {
	var b strings.Builder
	cfg := r.cfg
	fmt.Fprintf(&b, "fault campaign: %d nodes, %v of faults (%v in all), seed %d, %d clients (%d per node)\n",
		cfg.nodes, cfg.duration, r.elapsed.Round(time.Second), cfg.seed, cfg.nodes*cfg.clientsPerNode, cfg.clientsPerNode)
	c := r.count
	fmt.Fprintf(&b, "operations: %d sent: %d answered, %d failed (nothing done), %d unknown outcome, %d unexpected replies\n",
		c.ops.Load(), c.okOps.Load(), c.failedOps.Load(), c.unknownOps.Load(), c.unexpected.Load())
	var gs []string
	total := 0
	for w, n := range r.grants {
		gs = append(gs, fmt.Sprintf("%s %d", w, n))
		total += n
	}
	sort.Strings(gs)
	fmt.Fprintf(&b, "grants: %d (%s)\n", total, strings.Join(gs, ", "))
	fmt.Fprintf(&b, "leader changes: %d; full restarts: %d; snapshots taken %d, installed %d\n\n",
		r.leaderChanges, r.restarts, r.snapsTaken, r.snapsInstall)

	tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "fault\tcount\trecovery (leader lost → first acknowledged write)\n")
	byKind := make(map[faultKind][]fault)
	var kinds []faultKind
	for _, f := range r.faults {
		if _, seen := byKind[f.kind]; !seen {
			kinds = append(kinds, f.kind)
		}
		byKind[f.kind] = append(byKind[f.kind], f)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	for _, k := range kinds {
		var rec []string
		for _, f := range byKind[k] {
			if f.recovery > 0 {
				rec = append(rec, f.recovery.Round(10*time.Millisecond).String())
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", k, len(byKind[k]), strings.Join(rec, " "))
	}
	fmt.Fprintf(tw, "total\t%d\t\n", len(r.faults))
	tw.Flush()
	b.WriteString("\n")

	tw = tabwriter.NewWriter(&b, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "checker\tchecked\tviolations\tnotes\n")
	for _, res := range r.results {
		notes := strings.Join(res.notes, "; ")
		if res.took > time.Second {
			notes = strings.TrimPrefix(notes+fmt.Sprintf("; took %v", res.took.Round(100*time.Millisecond)), "; ")
		}
		found := strconv.Itoa(len(res.violations))
		if res.undecided != "" {
			found = "undecided"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", res.name, res.checked, found, notes)
	}
	fmt.Fprintf(tw, "logs\t%d\t%d\tpanic:, fatal error:, DATA RACE\n", r.logFiles, len(r.badLogs))
	fmt.Fprintf(tw, "harness errors\t\t%d\t\n", len(r.nemesisErrs))
	tw.Flush()
	b.WriteString("\nfault log:\n")
	for _, f := range r.faults {
		fmt.Fprintf(&b, "  +%-8v %s: %s", f.at.Round(100*time.Millisecond), f.kind, f.detail)
		if f.recovery > 0 {
			fmt.Fprintf(&b, " (recovered in %v)", f.recovery.Round(10*time.Millisecond))
		}
		b.WriteString("\n")
	}
	return b.String()
}
