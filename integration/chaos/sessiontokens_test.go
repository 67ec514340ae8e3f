//go:build linux

package chaos

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestSessionEndHandsOffDistinctTokens: when a session that holds several
// locks ends, each lock is handed to the waiter queued for it, in the
// entry that ends the session. Those are grants to different owners, and
// docs/design.md ("Tokens") promises that no two grants share a token.
// The sessions workload found them sharing one (checkTokens: "token N
// granted twice"); this shows it on one node, without faults.
func TestSessionEndHandsOffDistinctTokens(t *testing.T) {
	requireRoot(t)
	c, err := startCluster(clusterConfig{nodes: 1, bin: fencerdBin, dir: t.TempDir()})
	if err != nil {
		t.Fatalf("starting a node: %v", err)
	}
	t.Cleanup(c.teardown)
	clk := clock{start: time.Now()}
	count := &counters{}
	newCl := func(id int) *client {
		cl := newClient(id, 0, c, clk, 1, count)
		t.Cleanup(cl.conn.close)
		return cl
	}
	must := func(cl *client, args ...string) any {
		t.Helper()
		v, out, _, _ := cl.do(clientTimeout, args...)
		if out != ok {
			t.Fatalf("%v: %v", args, v)
		}
		return v
	}

	holder := newCl(0)
	id, isInt := must(holder, "FENCE.SESSION", "OPEN", "60000").(int64)
	if !isInt {
		t.Fatal("FENCE.SESSION OPEN did not answer an ID")
	}
	keys := []string{"k1", "k2", "k3"}
	for _, k := range keys {
		if _, granted, err := asGrant(must(holder, "FENCE.ACQUIRE", k, "holder", "0", "SESSION", fmt.Sprint(id))); !granted || err != nil {
			t.Fatalf("acquiring %s under the session: granted %v, %v", k, granted, err)
		}
	}
	// One waiter per key, queued behind the session's locks.
	tokens := make([]uint64, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		cl := newCl(i + 1)
		wg.Go(func() {
			v, out, _, _ := cl.do(clientTimeout+10*time.Second, "FENCE.ACQUIRE", k, fmt.Sprintf("waiter-%d", i), "10000", "WAIT", "10000")
			if tok, granted, err := asGrant(v); out == ok && granted && err == nil {
				tokens[i] = tok
			}
		})
	}
	// A waiting ACQUIRE on one local node is queued within milliseconds;
	// a second is a generous margin.
	time.Sleep(time.Second)
	if v := must(holder, "FENCE.SESSION", "CLOSE", fmt.Sprint(id)); v != int64(1) {
		t.Fatalf("FENCE.SESSION CLOSE answered %v, want 1", v)
	}
	wg.Wait()
	seen := make(map[uint64]string)
	for i, tok := range tokens {
		if tok == 0 {
			t.Fatalf("the waiter on %s was not granted", keys[i])
		}
		if k, dup := seen[tok]; dup {
			t.Errorf("token %d granted twice: on %s and on %s, to two waiters handed their locks when the session closed", tok, k, keys[i])
		}
		seen[tok] = keys[i]
	}
	t.Logf("tokens handed to the waiters: %v", tokens)
}
