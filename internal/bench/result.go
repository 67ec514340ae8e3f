package bench

import (
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Result is the one JSON line a lock-workload run prints. Its fields and
// their JSON names are exactly those of the Result of peerbench (the
// peers' benchmark that make bench PEERS=1 runs), so that fencer's lines
// and the peers' can be read by the same program.
type Result struct {
	Target   string  `json:"target"`
	Workload string  `json:"workload"`
	Clients  int     `json:"clients"`
	Keys     int     `json:"keys,omitempty"` // contended only
	Seconds  float64 `json:"duration_s"`
	Ops      int64   `json:"ops"` // acquire+release pairs completed in the measured window
	OpsPerS  float64 `json:"ops_per_s"`
	// HandoffsPerS (contended only) counts acquisitions whose previous
	// holder of that name was another client.
	HandoffsPerS float64 `json:"handoffs_per_s,omitempty"`

	AcqP50  int64 `json:"acquire_p50_us"`
	AcqP99  int64 `json:"acquire_p99_us"`
	AcqP999 int64 `json:"acquire_p999_us"`
	AcqMax  int64 `json:"acquire_max_us"`
	RelP50  int64 `json:"release_p50_us"`
	RelP99  int64 `json:"release_p99_us"`

	Errors       int64  `json:"errors"`                  // failed acquires+releases started in the measured window
	GaveUp       int64  `json:"acquire_gave_up"`         // subset of errors: acquire timed out / wait ended
	WarmupErrors int64  `json:"warmup_errors,omitempty"` // failures during warm-up (not in errors)
	FirstError   string `json:"first_error,omitempty"`

	// Safety checks done by the harness; both must be 0.
	Overlaps         int64  `json:"overlaps"`          // contended: granted while another client of this run held it
	TokenRegressions int64  `json:"token_regressions"` // a name's token did not increase
	LastToken        uint64 `json:"last_token,omitempty"`

	ClientCPUPct float64 `json:"client_cpu_pct"`    // this process over the window, 100 = one core
	HostCPUPct   float64 `json:"host_cpu_busy_pct"` // whole machine over the window, 100 = every core busy
	Load1        float64 `json:"load1_before"`

	Error string `json:"error,omitempty"` // the run could not be done at all
}

// RaftResult is the JSON line of one bare-raft baseline run (workload
// "commits"): N goroutines in the leader each apply a small entry and wait
// for its future, over and over.
type RaftResult struct {
	Target   string  `json:"target"`   // "raft" (3 nodes) or "raft-1"
	Workload string  `json:"workload"` // "commits"
	Clients  int     `json:"clients"`  // concurrent applies
	Nodes    int     `json:"nodes"`
	Seconds  float64 `json:"duration_s"`

	Commits      int64   `json:"commits"` // applies that completed in the measured window
	CommitsPerS  float64 `json:"commits_per_s"`
	CommitP50    int64   `json:"commit_p50_us"`
	CommitP99    int64   `json:"commit_p99_us"`
	CommitP999   int64   `json:"commit_p999_us"`
	CommitMax    int64   `json:"commit_max_us"`
	Errors       int64   `json:"errors"`
	FirstError   string  `json:"first_error,omitempty"`
	LeaderCPUPct float64 `json:"leader_cpu_pct"` // the leader process (load generator included), 100 = one core
	HostCPUPct   float64 `json:"host_cpu_busy_pct"`
	Load1        float64 `json:"load1_before"`

	// The settings the baseline ran with (see internal/cmd/raftbench).
	EntryBytes       int    `json:"entry_bytes"`
	BatchApplyCh     bool   `json:"batch_apply_ch"`
	MaxAppendEntries int    `json:"max_append_entries"`
	LogCache         int    `json:"log_cache"`
	NoSync           bool   `json:"no_sync"`
	LogStore         string `json:"log_store"`
	SnapshotThresh   uint64 `json:"snapshot_threshold"`
	// RaftSet are the raft.Config assignments made to fencerd's
	// (server.RaftConfig), from raftbench's --raft-set and its short forms.
	RaftSet []string `json:"raft_set,omitempty"`

	Error string `json:"error,omitempty"`
}

// Latencies summarises samples the way peerbench does: nearest-rank
// percentiles of the sorted samples, in microseconds.
type Latencies []time.Duration

// Sort sorts the samples; Pct needs them sorted.
func (l Latencies) Sort() { slices.Sort(l) }

// Pct returns the q-quantile (nearest rank) of sorted samples in µs.
func (l Latencies) Pct(q float64) int64 {
	if len(l) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(l)))) - 1
	i = min(max(i, 0), len(l)-1)
	return l[i].Microseconds()
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// CPUSample is a reading of /proc/stat's first line (all CPUs), in ticks.
type CPUSample struct{ busy, total uint64 }

// HostCPU reads the machine's CPU counters; zero if they are unavailable.
func HostCPU() CPUSample {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUSample{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var s CPUSample
	for i, v := range f[1:] {
		if i >= 8 { // guest, guest_nice are already inside user/nice
			break
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		s.total += n
		if i != 3 && i != 4 { // idle, iowait
			s.busy += n
		}
	}
	return s
}

// BusyPct is the share of the machine that was busy between s and later,
// 100 meaning every core.
func (s CPUSample) BusyPct(later CPUSample) float64 {
	busy, total := later.busy-s.busy, later.total-s.total
	if total == 0 {
		return 0
	}
	return round1(100 * float64(busy) / float64(total))
}

// ProcCPU is the CPU time this process has used so far.
func ProcCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUPct is d of CPU time over a window, 100 meaning one core.
func CPUPct(d, window time.Duration) float64 {
	if window <= 0 {
		return 0
	}
	return round1(100 * d.Seconds() / window.Seconds())
}

// Load1 is the 1-minute load average.
func Load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
