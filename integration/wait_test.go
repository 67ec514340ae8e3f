package integration

import (
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// TestWaitAnswersTheFollowersACommitReaches: WAIT answers at once, on any
// node, with the followers every acknowledged write has reached: 0 on one
// node, 1 of two (a commit needs both) and of three (redisdiff's wait.cases compares it with Redis, which
// has no replica there).
func TestWaitAnswersTheFollowersACommitReaches(t *testing.T) {
	one := startFencerd(t)
	c := startNodeCluster(t, 3)
	leader := c.leader(t)
	follower := c.others(leader)[0]
	two := startNodeCluster(t, 2)
	for _, tc := range []struct {
		name string
		addr string
		want int64
	}{
		{"one node", one.addr, 0},
		{"leader of three", c.nodes[leader].addr, 1},
		{"follower of three", c.nodes[follower].addr, 1},
		{"follower of two", two.nodes[two.others(two.leader(t))[0]].addr, 1},
	} {
		dc := dialDiff(t, tc.addr)
		if v, err := dc.do("SET", "wait-k", "v", "PX", "10000"); err != nil || v.Str != "OK" {
			t.Fatalf("%s: SET: %v %v", tc.name, v, err)
		}
		start := time.Now()
		v, err := dc.do("WAIT", "2", "2000")
		if err != nil {
			t.Fatalf("%s: WAIT: %v", tc.name, err)
		}
		if v.Kind != resp.Integer || v.Int != tc.want {
			t.Errorf("%s: WAIT 2 2000 = %v, want (integer) %d", tc.name, v, tc.want)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: WAIT took %v, want an answer at once", tc.name, d)
		}
	}
}
