package bench

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeServer(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "node.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// Test files are not read.
	if err := os.WriteFile(filepath.Join(dir, "node_test.go"), []byte("package server\nfunc (n *Node) startRaft() { rc.Bogus = f() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReadServerRaft(t *testing.T) {
	dir := writeServer(t, `package server

const cacheSize = 1024
const pool = 3

func (n *Node) startRaft() error {
	cfg := n.cfg
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.id)
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.CommitTimeout = 5 * time.Millisecond
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.Logger = hclog.New(nil)
	store, _ := raftboltdb.New(raftboltdb.Options{Path: "x", NoSync: false})
	logs, _ := raft.NewLogCache(cacheSize, store)
	trans, _ := raft.NewTCPTransportWithLogger(cfg.RaftAddr, nil, pool, (10 * time.Second), nil)
	stream := raft.NewNetworkTransportWithLogger(s, 3, 10*time.Second, nil)
	return nil
}
`)
	got, err := ReadServerRaft(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := ServerRaft{
		Config:        []string{"BatchApplyCh=true", "MaxAppendEntries=256", "CommitTimeout=5ms", "SnapshotThreshold=cfg.SnapshotThreshold"},
		LogCache:      1024,
		TransportPool: 3, TransportTimeout: 10 * time.Second,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	wantArgs := "--log-cache 1024 --raft-set BatchApplyCh=true --raft-set MaxAppendEntries=256 --raft-set CommitTimeout=5ms --raft-set SnapshotThreshold=cfg.SnapshotThreshold"
	if a := strings.Join(got.Args(), " "); a != wantArgs {
		t.Errorf("Args %q", a)
	}
}

func TestReadServerRaftRefusesToGuess(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"computed value", "rc.MaxAppendEntries = f()\n\traft.NewLogCache(8, s)\n\traft.NewTCPTransportWithLogger(a, nil, 3, time.Second, nil)",
			"rc.MaxAppendEntries: cannot evaluate the expression at node.go:"},
		{"no log cache", "raft.NewTCPTransportWithLogger(a, nil, 3, time.Second, nil)", "no raft.NewLogCache call"},
		{"transports differ", "raft.NewLogCache(8, s)\n\traft.NewTCPTransportWithLogger(a, nil, 3, time.Second, nil)\n\traft.NewNetworkTransportWithLogger(s, 5, time.Second, nil)",
			"differ in pool or timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeServer(t, "package server\n\nfunc (n *Node) startRaft() error {\n\trc := raft.DefaultConfig()\n\t"+tt.body+"\n\treturn nil\n}\n")
			if _, err := ReadServerRaft(dir); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
		})
	}
	if _, err := ReadServerRaft(writeServer(t, "package server\n")); err == nil || !strings.Contains(err.Error(), "no startRaft") {
		t.Errorf("no startRaft: error %v", err)
	}
}
