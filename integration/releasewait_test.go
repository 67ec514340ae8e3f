package integration

import (
	"testing"
	"time"
)

// A client waits through one follower and gives up: it releases through the
// other follower (as the clients' "release in the background" does). The
// forwarded wait is answered null at once, the holder's release does not
// hand the lock to it, and a later acquire by that owner (a duplicate still
// on its way) is refused, on whichever node it arrives.
func TestReleaseThroughAnotherFollowerEndsTheWait(t *testing.T) {
	c := startNodeCluster(t, 3)
	leader := c.leader(t)
	f := c.others(leader)
	c.mustGrant(t, leader, clusterRetryWithin, "rw-k", "holder", 30*time.Second)

	type reply struct {
		v   any
		err error
		at  time.Time
	}
	waited := make(chan reply, 1)
	go func() {
		v, err := clusterCall(c.nodes[f[0]].addr, 15*time.Second, "FENCE.ACQUIRE", "rw-k", "quitter", "30000", "WAIT", "10000")
		waited <- reply{v, err, time.Now()}
	}()
	// The wait is queued on the leader: a non-waiting acquire by another
	// owner now finds it there. Give it ample time to get there.
	time.Sleep(time.Second)
	released := c.callRetry(t, f[1], clusterRetryWithin, "FENCE.RELEASE", "rw-k", "quitter")
	sent := time.Now()
	if released != int64(0) {
		t.Fatalf("FENCE.RELEASE by the waiting owner = %#v, want 0 (it held nothing)", released)
	}
	select {
	case r := <-waited:
		if r.err != nil || r.v != nil {
			t.Fatalf("the forwarded wait answered %#v (%v), want null", r.v, r.err)
		}
		if d := r.at.Sub(sent); d > 2*time.Second {
			t.Errorf("the wait answered %v after the release, want at once", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the forwarded wait still waits 5 s after its owner's release")
	}
	if v := c.callRetry(t, f[0], clusterRetryWithin, "FENCE.RELEASE", "rw-k", "holder"); v != int64(1) {
		t.Fatalf("holder's FENCE.RELEASE = %#v, want 1", v)
	}
	if s, held := c.statusOf(t, f[1], clusterRetryWithin, "rw-k"); held {
		t.Fatalf("the lock is held by %q after the holder's release, want free", s.owner)
	}
	for _, i := range []int{f[0], f[1], leader} {
		if v := c.callRetry(t, i, clusterRetryWithin, "FENCE.ACQUIRE", "rw-k", "quitter", "30000"); v != nil {
			t.Fatalf("node %d: the owner's acquire after its release answered %#v, want null", i+1, v)
		}
	}
	c.mustGrant(t, leader, clusterRetryWithin, "rw-k", "next", 30*time.Second)
}
