package bench

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Row is one result line of any kind (fencer's, peerbench's, the raft
// baseline's) in the terms of the table.
type Row struct {
	Target, Workload string
	Clients          int
	// OpsPerS is acquire+release pairs/s, or commits/s for the baseline.
	OpsPerS      float64
	HandoffsPerS float64
	// P50, P99, P999 are the acquire latency (the commit latency for the
	// baseline) in µs.
	P50, P99, P999 int64
	Errors         int64
	Overlaps       int64
	Regressions    int64
	HostCPUPct     float64
	Error          string
}

// ParseRow reads one JSON result line; ok is false for lines that are not
// results (probes, anything else).
func ParseRow(line []byte) (row Row, ok bool) {
	var v struct {
		Result
		CommitsPerS float64 `json:"commits_per_s"`
		CommitP50   int64   `json:"commit_p50_us"`
		CommitP99   int64   `json:"commit_p99_us"`
		CommitP999  int64   `json:"commit_p999_us"`
	}
	if err := json.Unmarshal(line, &v); err != nil || v.Target == "" || v.Workload == "" {
		return Row{}, false
	}
	r := Row{Target: v.Target, Workload: v.Workload, Clients: v.Clients, OpsPerS: v.OpsPerS,
		HandoffsPerS: v.HandoffsPerS, P50: v.AcqP50, P99: v.AcqP99, P999: v.AcqP999,
		Errors: v.Errors, Overlaps: v.Overlaps, Regressions: v.TokenRegressions,
		HostCPUPct: v.HostCPUPct, Error: v.Error}
	if v.Workload == "commits" {
		r.OpsPerS, r.P50, r.P99, r.P999 = v.CommitsPerS, v.CommitP50, v.CommitP99, v.CommitP999
	}
	return r, true
}

// Ratio is one of the comparisons the issue asks for, at one client count.
type Ratio struct {
	Name     string  // e.g. "fencer uncontended pairs/s ÷ (raft commits/s ÷ 2)"
	Fencer   string  // "fencer" or "fencer-1"
	Against  string  // "raft", "raft-1", "etcd", "redis-aof-always"
	Workload string  // the fencer row's workload
	Clients  int     // the fencer row's client count
	Value    float64 // 0 when a side is missing
	Goal     float64 // the value it should reach (0: none stated)
}

// rowSet finds rows by target, workload and clients.
type rowSet map[string]Row

func key(target, workload string, clients int) string {
	return fmt.Sprintf("%s/%s/%d", target, workload, clients)
}

func (s rowSet) get(target, workload string, clients int) (Row, bool) {
	r, ok := s[key(target, workload, clients)]
	return r, ok && r.Error == ""
}

// speed is a contended row's handoffs/s, or its pairs/s with one client
// (a lone client hands off to no one).
func speed(r Row) float64 {
	if r.Workload == Contended && r.Clients > 1 {
		return r.HandoffsPerS
	}
	return r.OpsPerS
}

// Ratios computes from rows the comparisons docs/performance.md sets goals
// for:
//   - fencer pairs/s ÷ (bare-raft commits/s ÷ 2) at the same client count
//     (fencer against raft, fencer-1 against raft-1), goal 0.8;
//   - contended handoffs/s ÷ bare-raft commits/s at 1 client, goal 0.8;
//   - fencer ÷ etcd, uncontended and contended, goal above 1;
//   - fencer-1 (and fencer) ÷ redis-aof-always;
//   - a read lock's and a permit's pairs/s ÷ the plain lock's.
func Ratios(rows []Row) []Ratio {
	s := rowSet{}
	var counts []int
	for _, r := range rows {
		s[key(r.Target, r.Workload, r.Clients)] = r
		if !slices.Contains(counts, r.Clients) {
			counts = append(counts, r.Clients)
		}
	}
	slices.Sort(counts)
	var out []Ratio
	add := func(r Ratio, num, den float64) {
		if den > 0 && num > 0 {
			r.Value = num / den
		}
		out = append(out, r)
	}
	pairs := []struct{ fencer, raft string }{{"fencer", "raft"}, {"fencer-1", "raft-1"}}
	for _, p := range pairs {
		for _, c := range counts {
			f, ok1 := s.get(p.fencer, Uncontended, c)
			r, ok2 := s.get(p.raft, "commits", c)
			if ok1 && ok2 {
				goal := 0.0
				if c == 16 || c == 256 { // where the issue states it
					goal = 0.8
				}
				add(Ratio{Name: fmt.Sprintf("%s uncontended pairs/s ÷ (%s commits/s ÷ 2)", p.fencer, p.raft),
					Fencer: p.fencer, Against: p.raft, Workload: Uncontended, Clients: c, Goal: goal}, f.OpsPerS, r.OpsPerS/2)
			}
		}
		r1, ok := s.get(p.raft, "commits", 1)
		for _, c := range counts {
			f, okf := s.get(p.fencer, Contended, c)
			if ok && okf && c > 1 {
				add(Ratio{Name: fmt.Sprintf("%s contended handoffs/s ÷ %s commits/s at 1 client", p.fencer, p.raft),
					Fencer: p.fencer, Against: p.raft, Workload: Contended, Clients: c, Goal: 0.8}, speed(f), r1.OpsPerS)
			}
		}
	}
	peers := []struct {
		fencer, peer string
		goal         float64
	}{{"fencer", "etcd", 1}, {"fencer-1", "redis-aof-always", 0.7}, {"fencer", "redis-aof-always", 0}}
	for _, p := range peers {
		for _, wl := range []string{Uncontended, Contended} {
			for _, c := range counts {
				f, ok1 := s.get(p.fencer, wl, c)
				e, ok2 := s.get(p.peer, wl, c)
				if !ok1 || !ok2 {
					continue
				}
				what := "pairs/s"
				if wl == Contended && c > 1 {
					what = "handoffs/s"
				}
				goal := p.goal
				if p.peer == "redis-aof-always" && (wl != Uncontended || c != 16) {
					goal = 0 // the issue states the redis goal at 16 clients, uncontended
				}
				add(Ratio{Name: fmt.Sprintf("%s ÷ %s, %s %s", p.fencer, p.peer, wl, what),
					Fencer: p.fencer, Against: p.peer, Workload: wl, Clients: c, Goal: goal}, speed(f), speed(e))
			}
		}
	}
	// A read lock's and a permit's rate beside the plain lock's, on the
	// same target and client count.
	for _, fencer := range []string{"fencer", "fencer-1"} {
		for _, wl := range []string{ReadShared, Semaphore} {
			for _, c := range counts {
				f, ok1 := s.get(fencer, wl, c)
				u, ok2 := s.get(fencer, Uncontended, c)
				if ok1 && ok2 {
					add(Ratio{Name: fmt.Sprintf("%s %s pairs/s ÷ its uncontended plain-lock pairs/s", fencer, wl),
						Fencer: fencer, Against: plainLock, Workload: wl, Clients: c}, f.OpsPerS, u.OpsPerS)
				}
			}
		}
	}
	return out
}

// plainLock is the Against of a ratio to the same target's uncontended
// plain-lock row.
const plainLock = "plain lock"

// targetOrder is the order of targets within a block of the table.
var targetOrder = []string{"fencer", "fencer-1", "raft", "raft-1", "redis", "redis-aof-always", "redlock",
	"etcd", "etcd-session-per-lock", "zookeeper", "null"}

func targetRank(t string) int {
	if i := slices.Index(targetOrder, t); i >= 0 {
		return i
	}
	return len(targetOrder)
}

var workloadOrder = append(WorkloadNames(false), "commits")

// Table renders rows as one Markdown table, fencer's rows beside the bare
// raft baseline's and the peers', grouped by workload and client count,
// with each fencer row's ratios to bare raft, etcd and redis-aof-always,
// followed by the list of ratios against the goals.
func Table(rows []Row) string {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b Row) int {
		if d := slices.Index(workloadOrder, a.Workload) - slices.Index(workloadOrder, b.Workload); d != 0 {
			return d
		}
		if d := a.Clients - b.Clients; d != 0 {
			return d
		}
		return targetRank(a.Target) - targetRank(b.Target)
	})
	ratios := Ratios(rows)
	find := func(fencer, against, wl string, clients int) string {
		for _, r := range ratios {
			if r.Fencer == fencer && r.Against == against && r.Workload == wl && r.Clients == clients && r.Value > 0 {
				return fmt.Sprintf("%.2f", r.Value)
			}
		}
		return ""
	}
	var b strings.Builder
	b.WriteString("| workload | clients | target | pairs/s (raft: commits/s) | handoffs/s | acquire p50 / p99 / p99.9 ms | errors | overlaps / regressions | host CPU % | ÷ bare raft | ÷ etcd | ÷ redis-aof-always | ÷ plain lock |\n")
	b.WriteString("|---|---:|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(&b, "| %s | %d | %s | error: %s | | | | | | | | | |\n", r.Workload, r.Clients, r.Target, strings.ReplaceAll(r.Error, "|", "/"))
			continue
		}
		hand := ""
		if r.HandoffsPerS > 0 {
			hand = fmt.Sprintf("%.0f", r.HandoffsPerS)
		}
		var vsRaft, vsEtcd, vsRedis, vsPlain string
		if strings.HasPrefix(r.Target, "fencer") && r.Workload != "commits" {
			raft := "raft"
			if r.Target == "fencer-1" {
				raft = "raft-1"
			}
			vsRaft = find(r.Target, raft, r.Workload, r.Clients)
			vsEtcd = find(r.Target, "etcd", r.Workload, r.Clients)
			vsRedis = find(r.Target, "redis-aof-always", r.Workload, r.Clients)
			vsPlain = find(r.Target, plainLock, r.Workload, r.Clients)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %s | %s / %s / %s | %d | %d / %d | %.0f | %s | %s | %s | %s |\n",
			r.Workload, r.Clients, r.Target, r.OpsPerS, hand, ms(r.P50), ms(r.P99), ms(r.P999),
			r.Errors, r.Overlaps, r.Regressions, r.HostCPUPct, vsRaft, vsEtcd, vsRedis, vsPlain)
	}
	if len(ratios) > 0 {
		b.WriteString("\nRatios (goal in brackets; contended compares handoffs/s, or pairs/s with 1 client):\n\n")
		for _, r := range ratios {
			mark := ""
			switch {
			case r.Value == 0:
				mark = " (missing)"
			case r.Goal > 0 && r.Value >= r.Goal:
				mark = fmt.Sprintf(" [≥ %.1f: met]", r.Goal)
			case r.Goal > 0:
				mark = fmt.Sprintf(" [≥ %.1f: NOT met]", r.Goal)
			}
			fmt.Fprintf(&b, "- %s, %d clients: %.2f%s\n", r.Name, r.Clients, r.Value, mark)
		}
	}
	return b.String()
}

// ms renders µs as milliseconds with two decimals.
func ms(us int64) string { return fmt.Sprintf("%.2f", float64(us)/1000) }
