package bench

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestParseRow(t *testing.T) {
	tests := []struct {
		name, line string
		want       Row
		ok         bool
	}{
		{"peerbench line",
			`{"target":"etcd","workload":"contended","clients":16,"keys":1,"duration_s":10,"ops":1500,"ops_per_s":150,"handoffs_per_s":149.5,"acquire_p50_us":99000,"acquire_p99_us":120000,"acquire_p999_us":130000,"acquire_max_us":140000,"release_p50_us":4000,"release_p99_us":9000,"errors":1,"acquire_gave_up":0,"overlaps":0,"token_regressions":0,"client_cpu_pct":5,"host_cpu_busy_pct":80,"load1_before":1}`,
			Row{Target: "etcd", Workload: "contended", Clients: 16, OpsPerS: 150, HandoffsPerS: 149.5, P50: 99000, P99: 120000, P999: 130000, Errors: 1, HostCPUPct: 80}, true},
		{"baseline line",
			`{"target":"raft-1","workload":"commits","clients":1,"nodes":1,"duration_s":5,"commits":10000,"commits_per_s":2000,"commit_p50_us":450,"commit_p99_us":900,"commit_p999_us":1500,"commit_max_us":2000,"errors":0,"leader_cpu_pct":30,"host_cpu_busy_pct":40}`,
			Row{Target: "raft-1", Workload: "commits", Clients: 1, OpsPerS: 2000, P50: 450, P99: 900, P999: 1500, HostCPUPct: 40}, true},
		{"probe", `{"probe":"fsync","p50_us":100}`, Row{}, false},
		{"not json", `# progress`, Row{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRow([]byte(tt.line))
			if ok != tt.ok || got != tt.want {
				t.Errorf("ParseRow = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestRatios(t *testing.T) {
	rows := []Row{
		{Target: "fencer", Workload: Uncontended, Clients: 16, OpsPerS: 2000},
		{Target: "raft", Workload: "commits", Clients: 16, OpsPerS: 5000},
		{Target: "raft", Workload: "commits", Clients: 1, OpsPerS: 1000},
		{Target: "fencer", Workload: Contended, Clients: 16, OpsPerS: 900, HandoffsPerS: 850},
		{Target: "etcd", Workload: Uncontended, Clients: 16, OpsPerS: 1000},
		{Target: "etcd", Workload: Contended, Clients: 16, OpsPerS: 200, HandoffsPerS: 170},
		{Target: "fencer-1", Workload: Uncontended, Clients: 16, OpsPerS: 6000},
		{Target: "redis-aof-always", Workload: Uncontended, Clients: 16, OpsPerS: 12000},
		{Target: "fencer-1", Workload: Contended, Clients: 1, OpsPerS: 700},
		{Target: "redis-aof-always", Workload: Contended, Clients: 1, OpsPerS: 1400},
		{Target: "etcd", Workload: Contended, Clients: 256, Error: "setup failed"},
		{Target: "fencer", Workload: Contended, Clients: 256, HandoffsPerS: 900},
		{Target: "fencer-1", Workload: ReadShared, Clients: 16, OpsPerS: 4500},
		{Target: "fencer-1", Workload: Semaphore, Clients: 16, OpsPerS: 3000},
		{Target: "fencer", Workload: Semaphore, Clients: 256, OpsPerS: 3000},
	}
	want := map[string]float64{
		"fencer uncontended pairs/s ÷ (raft commits/s ÷ 2)/16":               0.8, // 2000 / 2500
		"fencer contended handoffs/s ÷ raft commits/s at 1 client/16":        0.85,
		"fencer contended handoffs/s ÷ raft commits/s at 1 client/256":       0.9,
		"fencer ÷ etcd, uncontended pairs/s/16":                              2,
		"fencer ÷ etcd, contended handoffs/s/16":                             5,
		"fencer-1 ÷ redis-aof-always, uncontended pairs/s/16":                0.5,
		"fencer-1 ÷ redis-aof-always, contended pairs/s/1":                   0.5,
		"fencer-1 rw-read pairs/s ÷ its uncontended plain-lock pairs/s/16":   0.75,
		"fencer-1 semaphore pairs/s ÷ its uncontended plain-lock pairs/s/16": 0.5,
	}
	got := map[string]float64{}
	for _, r := range Ratios(rows) {
		got[r.Name+"/"+strconv.Itoa(r.Clients)] = r.Value
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || math.Abs(g-v) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, ok := got["fencer ÷ etcd, contended handoffs/s/256"]; ok {
		t.Error("a ratio against a failed etcd run")
	}
	if _, ok := got["fencer semaphore pairs/s ÷ its uncontended plain-lock pairs/s/256"]; ok {
		t.Error("a ratio to a plain-lock row that is not there")
	}

	table := Table(rows)
	for _, s := range []string{
		"| uncontended | 16 | fencer | 2000 |  | 0.00 / 0.00 / 0.00 | 0 | 0 / 0 | 0 | 0.80 | 2.00 | 0.17 |  |",
		"| rw-read | 16 | fencer-1 | 4500 |  | 0.00 / 0.00 / 0.00 | 0 | 0 / 0 | 0 |  |  |  | 0.75 |",
		"| contended | 256 | etcd | error: setup failed |",
		"- fencer uncontended pairs/s ÷ (raft commits/s ÷ 2), 16 clients: 0.80 [≥ 0.8: met]",
		"- fencer-1 ÷ redis-aof-always, uncontended pairs/s, 16 clients: 0.50 [≥ 0.7: NOT met]",
		"- fencer-1 semaphore pairs/s ÷ its uncontended plain-lock pairs/s, 16 clients: 0.50\n",
	} {
		if !strings.Contains(table, s) {
			t.Errorf("table lacks %q:\n%s", s, table)
		}
	}
	// fencer's rows come before the baseline's and the peers' in a block.
	if strings.Index(table, "| uncontended | 16 | fencer |") > strings.Index(table, "| uncontended | 16 | etcd |") {
		t.Errorf("fencer is not first in its block:\n%s", table)
	}
}
