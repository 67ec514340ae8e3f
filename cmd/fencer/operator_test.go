package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// Completion offers lock names and member IDs from the cluster, and from a
// cluster that does not answer, nothing, quickly.
func TestCompletionAsksTheCluster(t *testing.T) {
	for _, name := range []string{"comp:alpha", "comp:beta", "other:x"} {
		if r := fencer(t, "acquire", name, "--ttl", "30s"); r.code != 0 {
			t.Fatalf("acquire %s: exit %d %q", name, r.code, r.stderr)
		}
	}
	r := fencer(t, "__complete", "locks", "comp:")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "comp:alpha\ncomp:beta\n:") {
		t.Fatalf("completing locks comp: exit %d %q", r.code, r.stdout)
	}
	r = fencer(t, "__complete", "watch", "--prefix", "comp:")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "comp:alpha\ncomp:beta\n:") {
		t.Fatalf("completing watch --prefix comp: exit %d %q", r.code, r.stdout)
	}
	r = fencer(t, "__complete", "watch", "comp:")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "comp:alpha\ncomp:beta\n:") {
		t.Fatalf("completing watch comp: exit %d %q", r.code, r.stdout)
	}
	if r := fencer(t, "watch", "x", "--prefix", "y"); r.code != exitUsage || !strings.Contains(r.stderr, "not both") {
		t.Fatalf("watch NAME --prefix: exit %d %q", r.code, r.stderr)
	}
	r = fencer(t, "__complete", "transfer", "")
	if r.code != 0 || !strings.Contains(r.stdout, "\tleader\n") {
		t.Fatalf("completing transfer: exit %d %q", r.code, r.stdout)
	}
	// A port that accepts and never answers: completion gives up.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	start := time.Now()
	r = fencer(t, "--addr", ln.Addr().String(), "__complete", "locks", "comp:")
	if took := time.Since(start); r.code != 0 || strings.Contains(r.stdout, "comp:") || took > 1500*time.Millisecond {
		t.Fatalf("completing against a silent port: exit %d %q after %v", r.code, r.stdout, took)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if r := fencer(t, "completion", shell); r.code != 0 || !strings.Contains(r.stdout, "fencer") {
			t.Fatalf("completion %s: exit %d", shell, r.code)
		}
	}
}

// revoke refuses to run unconfirmed without a terminal, and --output takes
// only table or json.
func TestOperatorCommandLines(t *testing.T) {
	if r := fencer(t, "revoke", "x"); r.code != exitUsage || !strings.Contains(r.stderr, "pass --yes") {
		t.Fatalf("revoke without a terminal: exit %d %q", r.code, r.stderr)
	}
	if r := fencer(t, "members", "-o", "yaml"); r.code != exitUsage || !strings.Contains(r.stderr, "--output must be table or json") {
		t.Fatalf("members -o yaml: exit %d %q", r.code, r.stderr)
	}
	if r := fencer(t, "locks", "--page-size", "0"); r.code != exitUsage {
		t.Fatalf("locks --page-size 0: exit %d %q", r.code, r.stderr)
	}
}
