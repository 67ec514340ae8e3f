package main

import (
	"math"
	"testing"

	"github.com/fencerlock/fencer/internal/resp"
)

// formingReply is a FENCE.FORMING reply of the given pairs (RESP2 shape).
func formingReply(pairs ...resp.Value) resp.Value {
	return resp.Value{Kind: resp.Array, Elems: pairs}
}

func bulk(s string) resp.Value   { return resp.Value{Kind: resp.BulkString, Str: s} }
func integer(n int64) resp.Value { return resp.Value{Kind: resp.Integer, Int: n} }

// parseForming reads every key; a reply without last_index (an earlier
// build) is taken to have state and entries past the bootstrap, so that
// what it leaves out never counts as evidence that a node never ran.
func TestParseForming(t *testing.T) {
	member := resp.Value{Kind: resp.Array, Elems: []resp.Value{bulk("b"), bulk("b:1"), bulk(""), integer(1)}}
	r, ok := parseForming(formingReply(bulk("id"), bulk("a"), bulk("raft_addr"), bulk("a:1"), bulk("expect"), integer(3),
		bulk("cluster_id"), bulk("X"), bulk("replayed"), integer(1), bulk("has_state"), integer(0), bulk("last_index"), integer(1),
		bulk("leader"), integer(1), bulk("leader_addr"), bulk("a:0"), bulk("members"), resp.Value{Kind: resp.Array, Elems: []resp.Value{member}}))
	if !ok || r.ID != "a" || r.RaftAddr != "a:1" || r.Expect != 3 || r.ClusterID != "X" || !r.Replayed || r.HasState || r.LastIndex != 1 ||
		!r.Leader || r.LeaderAddr != "a:0" || len(r.Members) != 1 || r.Members[0].ID != "b" || !r.Members[0].Removed {
		t.Fatalf("parsed %+v, %v", r, ok)
	}
	old, ok := parseForming(formingReply(bulk("id"), bulk("a"), bulk("raft_addr"), bulk("a:1"), bulk("expect"), integer(3),
		bulk("cluster_id"), bulk(""), bulk("replayed"), integer(1), bulk("members"), resp.Value{Kind: resp.Array}))
	if !ok || !old.HasState || old.LastIndex != math.MaxUint64 || old.Leader {
		t.Fatalf("an earlier build's reply parsed as %+v, %v: want state, entries past the bootstrap, no leader", old, ok)
	}
}
