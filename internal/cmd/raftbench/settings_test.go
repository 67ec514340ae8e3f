package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/bench"
	"github.com/fencerlock/fencer/server"
	"github.com/hashicorp/raft"
)

// TestServerSettingsApply reads server/node.go's startRaft as make bench
// does and checks that the baseline can run on exactly those settings.
// When it fails, startRaft does something the baseline cannot mirror yet:
// teach bench.ReadServerRaft, setField or open about it.
func TestServerSettingsApply(t *testing.T) {
	sr, err := bench.ReadServerRaft(filepath.Join("..", "..", "..", "server"))
	if err != nil {
		t.Fatal(err)
	}
	if sr.NoSync {
		t.Error("startRaft opens its store with NoSync; the baseline always syncs")
	}
	if sr.TransportPool != transportPool || sr.TransportTimeout != transportTimeout {
		t.Errorf("startRaft's transport has pool %d, timeout %v; the baseline's %d, %v",
			sr.TransportPool, sr.TransportTimeout, transportPool, transportTimeout)
	}
	if sr.LogCache <= 0 {
		t.Errorf("LogCache %d", sr.LogCache)
	}
	s := settings{EntryBytes: 64, LogCache: sr.LogCache, RaftSet: sr.Config}
	rc, err := s.raftConfig("n1")
	if err != nil {
		t.Fatalf("startRaft's settings %q: %v", sr.Config, err)
	}
	if rc.SnapshotThreshold != server.DefaultConfig().SnapshotThreshold {
		t.Errorf("SnapshotThreshold %d, want server.DefaultConfig()'s", rc.SnapshotThreshold)
	}
	// The standalone defaults name what startRaft had when this was written.
	for _, a := range defaultSettings().RaftSet {
		if !slices.Contains(sr.Config, a) {
			t.Errorf("startRaft no longer sets %s (it sets %q)", a, sr.Config)
		}
	}
}

func TestSetField(t *testing.T) {
	ok := []struct {
		set   string
		check func(rc *raft.Config) bool
	}{
		{"BatchApplyCh=true", func(rc *raft.Config) bool { return rc.BatchApplyCh }},
		{"MaxAppendEntries=128", func(rc *raft.Config) bool { return rc.MaxAppendEntries == 128 }},
		{"CommitTimeout=5ms", func(rc *raft.Config) bool { return rc.CommitTimeout == 5*time.Millisecond }},
		{"SnapshotThreshold=cfg.SnapshotThreshold", func(rc *raft.Config) bool {
			return rc.SnapshotThreshold == server.DefaultConfig().SnapshotThreshold
		}},
	}
	for _, tt := range ok {
		rc, err := settings{RaftSet: []string{tt.set}}.raftConfig("n1")
		if err != nil {
			t.Errorf("%s: %v", tt.set, err)
			continue
		}
		if !tt.check(rc) {
			t.Errorf("%s: not applied", tt.set)
		}
	}
	for _, set := range []string{"NoSuchField=1", "LocalID=x", "SnapshotThreshold=cfg.MinTTL",
		"MaxAppendEntries=lots", "BatchApplyCh", "MaxAppendEntries=100000"} {
		if _, err := (settings{RaftSet: []string{set}}).raftConfig("n1"); err == nil {
			t.Errorf("%s: no error", set)
		} else if !strings.Contains(err.Error(), set) && !strings.Contains(err.Error(), "MaxAppendEntries") {
			t.Errorf("%s: error %v does not name it", set, err)
		}
	}
}

func TestEffectiveRaftSet(t *testing.T) {
	s := settings{RaftSet: []string{"A=1", "B=2", "A=3", "C=cfg.C", "B=4"}}
	if got := strings.Join(s.effectiveRaftSet(), " "); got != "A=3 B=4 C=cfg.C" {
		t.Errorf("got %q", got)
	}
}
