package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/hashicorp/raft"
)

// TestBaselineRunsTheNodesSettings checks that a baseline node without
// flags runs on the raft.Config a fencerd node does.
func TestBaselineRunsTheNodesSettings(t *testing.T) {
	rc, err := defaultSettings().raftConfig("n1")
	if err != nil {
		t.Fatal(err)
	}
	want := server.RaftConfig(server.DefaultConfig())
	want.LocalID, want.Logger = rc.LocalID, rc.Logger
	if !reflect.DeepEqual(rc, want) {
		t.Errorf("baseline raft.Config\n%+v\nwant the node's\n%+v", rc, want)
	}
	if s := defaultSettings(); s.LogCache != server.RaftLogCacheSize {
		t.Errorf("LogCache %d, want server.RaftLogCacheSize %d", s.LogCache, server.RaftLogCacheSize)
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
		{"SnapshotThreshold=100", func(rc *raft.Config) bool { return rc.SnapshotThreshold == 100 }},
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
