package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/fencerlock/fencer/internal/bench"
)

// Every workload of bench.Workloads runs (rw-read and semaphore included:
// fencer bench reads the same list as make bench).
func TestBenchPrintsPeerbenchLines(t *testing.T) {
	var stdout, stderr bytes.Buffer
	wls := bench.WorkloadNames(false)
	code := run([]string{"bench", "--addr", nodeAddr, "--workload", strings.Join(wls, ","), "--clients", "2",
		"--duration", "300ms", "--warmup", "50ms", "--target", "fencer-1"}, strings.NewReader(""), &stdout, &stderr, func(string) string { return "" })
	if code != 0 {
		t.Fatalf("exit %d; stderr %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != len(wls) {
		t.Fatalf("want %d lines, got %q", len(wls), stdout.String())
	}
	if !slices.Contains(wls, "rw-read") || !slices.Contains(wls, "semaphore") {
		t.Fatalf("workloads %v", wls)
	}
	for i, wl := range wls {
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		// peerbench's schema: these fields are always there.
		for _, k := range []string{"target", "workload", "clients", "ops_per_s", "acquire_p50_us", "acquire_p99_us",
			"acquire_p999_us", "errors", "overlaps", "token_regressions", "client_cpu_pct", "host_cpu_busy_pct"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks %q: %s", i, k, lines[i])
			}
		}
		if m["target"] != "fencer-1" || m["workload"] != wl || m["clients"] != 2.0 {
			t.Errorf("line %d: %s", i, lines[i])
		}
		if m["ops_per_s"].(float64) <= 0 || m["errors"] != 0.0 || m["overlaps"] != 0.0 || m["token_regressions"] != 0.0 {
			t.Errorf("line %d: %s", i, lines[i])
		}
		if _, ok := m["handoffs_per_s"]; ok != (wl == "contended") {
			t.Errorf("line %d: handoffs_per_s present %v: %s", i, ok, lines[i])
		}
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--workload", "both"},
		{"bench", "--clients", "0"},
		{"bench", "--duration", "0s"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append(args, "--addr", nodeAddr), strings.NewReader(""), &stdout, &stderr, func(string) string { return "" }); code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %s", args, code, exitUsage, stderr.String())
		}
	}
}
