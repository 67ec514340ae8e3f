package main

import (
	"net"
	"strings"
	"testing"

	"github.com/fencerlock/fencer/internal/version"
)

// fencer version prints its own version, then each member's as the node
// reports it; --client asks no node; with no node reachable it fails after
// printing its own.
func TestVersion(t *testing.T) {
	own := "fencer " + version.Get().String() + "\n"
	r := fencer(t, "version")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 3 || lines[0]+"\n" != own || !strings.HasPrefix(lines[1], "ID") {
		t.Fatalf("version: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if f := strings.Fields(lines[2]); len(f) < 4 || f[1] != nodeAddr || f[2] != "leader" || f[3] != version.Version {
		t.Fatalf("version: member row %q; want the node's address, leader, %s", lines[2], version.Version)
	}

	dead := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}()
	if r := fencer(t, "--addr", dead, "version", "--client"); r.code != 0 || r.stdout != own {
		t.Fatalf("version --client: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := fencer(t, "--addr", dead, "--timeout", "500ms", "version"); r.code != 1 || r.stdout != own || !strings.Contains(r.stderr, "no fencer node answers") {
		t.Fatalf("version against a dead node: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}
