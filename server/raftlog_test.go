package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// raftLines returns raft's logger writing JSON lines at level and above,
// and a function that returns the lines written so far.
func raftLines(t *testing.T, level hclog.Level) (hclog.Logger, func() []map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	out := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return newRaftLogger(out.With("node", "n1"), level), func() []map[string]any {
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m), l)
			lines = append(lines, m)
		}
		buf.Reset()
		return lines
	}
}

// The WARNs of a healthy start and join are logged at INFO; the same
// messages in a failure, and every other WARN, stay WARN.
func TestRaftLoggerDemotesOnlyHealthyWarnings(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  func(hclog.Logger)
		want []string // the level of each line
	}{
		{"first election, no leader known", func(l hclog.Logger) {
			l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "", "last-leader-id", "")
		}, []string{"INFO"}},
		{"second election, no leader known", func(l hclog.Logger) {
			l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "", "last-leader-id", "")
			l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "", "last-leader-id", "")
		}, []string{"INFO", "WARN"}},
		{"leader lost", func(l hclog.Logger) {
			l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "127.0.0.1:7380", "last-leader-id", "node-a")
		}, []string{"WARN"}},
		{"fresh joiner's first appends", func(l hclog.Logger) {
			l.Warn("failed to get previous log", "previous-index", 8, "last-index", uint64(0), "error", errors.New("log not found"))
			l.Named("replication").Warn("appendEntries rejected, sending older logs", "peer", "{Voter n2 127.0.0.1:7480}", "next", uint64(1))
		}, []string{"INFO", "INFO"}},
		{"follower with entries refuses an append", func(l hclog.Logger) {
			l.Warn("failed to get previous log", "previous-index", 80, "last-index", uint64(40), "error", errors.New("log not found"))
			l.Warn("appendEntries rejected, sending older logs", "peer", "{Voter n2 127.0.0.1:7480}", "next", uint64(41))
		}, []string{"WARN", "WARN"}},
		{"other warnings", func(l hclog.Logger) {
			l.Warn("failed to contact quorum of nodes, stepping down")
			l.Error("failed to appendEntries to", "peer", "n2")
		}, []string{"WARN", "ERROR"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, lines := raftLines(t, hclog.Info)
			tc.log(l)
			var got []string
			for _, m := range lines() {
				got = append(got, m["level"].(string))
				assert.Equal(t, "n1", m["node"])
				assert.True(t, strings.HasPrefix(m["module"].(string), "raft"), "%v", m)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// The raft level drops lines below it, a demoted line included; Named and
// With keep the module path and the arguments.
func TestRaftLoggerLevelAndNames(t *testing.T) {
	l, lines := raftLines(t, hclog.Warn)
	l.Info("entering follower state")
	l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "", "last-leader-id", "")
	assert.Empty(t, lines(), "INFO and the demoted WARN are below warn")
	l.Named("snapshot").With("path", "/d").Warn("found temporary snapshot", "name", "x")
	got := lines()
	require.Len(t, got, 1)
	assert.Equal(t, map[string]any{"time": got[0]["time"], "level": "WARN", "msg": "found temporary snapshot",
		"node": "n1", "module": "raft.snapshot", "path": "/d", "name": "x"}, got[0])
	assert.True(t, l.IsWarn())
	assert.False(t, l.IsInfo())

	// Values are text, as hclog's text format prints them; raft's "node"
	// does not take the node ID's key.
	l.Warn("values", "fmt", hclog.Fmt("%d servers", 3), "server", struct{ ID, Addr string }{"n2", "a:1"},
		"node", stringer("Node at a:1 [Follower]"), "index", uint64(7), "error", errors.New("boom"))
	got = lines()
	require.Len(t, got, 1)
	assert.Equal(t, "3 servers", got[0]["fmt"])
	assert.Equal(t, "{n2 a:1}", got[0]["server"])
	assert.Equal(t, "Node at a:1 [Follower]", got[0]["raft-node"])
	assert.Equal(t, "n1", got[0]["node"])
	assert.Equal(t, 7.0, got[0]["index"])
	assert.Equal(t, "boom", got[0]["error"])

	off, lines := raftLines(t, hclog.Off)
	off.Error("failed to appendEntries to")
	assert.Empty(t, lines())
}

type stringer string

func (s stringer) String() string { return string(s) }
