package integration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
)

// A leader election does not cancel a lease that renews in time: neither the
// lease of a client given every address (which talks to the leader, and
// loses it) nor that of a client given one follower's address (whose node
// forwards to whichever node leads). Both leases keep their tokens.
func TestClientLeaseSurvivesLeaderElection(t *testing.T) {
	cl := clStartCluster(t)
	old := cl.leader(t, clFormTimeout)
	follower := (old + 1) % 3

	const ttl = 10 * time.Second // renewals every 3.3s; an election takes 1-3s
	all := clNew(t, cl.addrs())
	one := clNew(t, cl.addrs(follower))
	la, err := all.TryAcquire(clCtx(t, requestTimeout), "survivor-all", client.WithTTL(ttl), client.WithAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	lf, err := one.TryAcquire(clCtx(t, requestTimeout), "survivor-one", client.WithTTL(ttl), client.WithAutoRenew())
	if err != nil {
		t.Fatal(err)
	}

	killed := time.Now()
	cl.nodes[old].kill9(t)
	now := cl.leader(t, clElectionTimeout)
	t.Logf("node %d killed; node %d leads after %v", old, now, time.Since(killed).Round(time.Millisecond))

	// Wait until both leases have renewed at least once through the new
	// leader: their validity then reaches past what it was at the kill.
	for _, l := range []*client.Lease{la, lf} {
		deadline := time.Now().Add(2 * ttl)
		for !l.Until().After(killed.Add(ttl)) {
			if l.Err() != nil {
				t.Fatalf("lease on %q ended during the election: %v", l.Name(), l.Err())
			}
			if time.Now().After(deadline) {
				t.Fatalf("lease on %q not renewed within %v of the kill", l.Name(), 2*ttl)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	check := clNew(t, cl.addrs(now))
	for _, l := range []*client.Lease{la, lf} {
		if l.Err() != nil {
			t.Fatalf("lease on %q ended: %v", l.Name(), l.Err())
		}
		s, held, err := check.Status(clCtx(t, requestTimeout), l.Name())
		if err != nil || !held || s.Token != l.Token() || s.Owner != l.Owner() {
			t.Fatalf("new leader's Status(%q) = %+v, %v, %v; want the lease with token %d", l.Name(), s, held, err, l.Token())
		}
		if err := l.Release(clCtx(t, requestTimeout)); err != nil {
			t.Fatalf("Release(%q): %v", l.Name(), err)
		}
	}
}

// A client given all three addresses keeps working when the node it used is
// killed: it tries the others, finds the new leader, and locks, extends,
// releases and reads as before, with tokens still increasing; a lease taken
// before the kill survives it, and a waiter queued before it is served.
func TestClientKeepsWorkingWhenItsNodeIsKilled(t *testing.T) {
	cl := clStartCluster(t)
	c := clNew(t, cl.addrs())

	before, err := c.TryAcquire(clCtx(t, requestTimeout), "failover", client.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := before.Release(clCtx(t, requestTimeout)); err != nil {
		t.Fatal(err)
	}
	// A waiter queued before the kill gets the lock after it.
	holder, err := c.TryAcquire(clCtx(t, requestTimeout), "queued", client.WithTTL(10*time.Second), client.WithAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		l, err := clNew(t, cl.addrs()).Acquire(clCtx(t, time.Minute), "queued", client.WithTTL(5*time.Second))
		if err == nil && l.Token() <= holder.Token() {
			err = fmt.Errorf("token %d after the holder's %d", l.Token(), holder.Token())
		}
		waited <- err
	}()
	time.Sleep(time.Second)

	// The client follows the leader, so the node it uses is the leader.
	used := cl.leader(t, clFormTimeout)
	cl.nodes[used].kill9(t)
	killed := time.Now()

	l, err := c.Acquire(clCtx(t, 30*time.Second), "failover", client.WithTTL(5*time.Second))
	if err != nil {
		t.Fatalf("Acquire after node %d was killed: %v", used, err)
	}
	t.Logf("first grant %v after the kill", time.Since(killed).Round(time.Millisecond))
	if l.Token() <= before.Token() {
		t.Fatalf("token %d after failover is not above %d", l.Token(), before.Token())
	}
	if err := l.Extend(clCtx(t, requestTimeout)); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	s, held, err := c.Status(clCtx(t, requestTimeout), "failover")
	if err != nil || !held || s.Token != l.Token() {
		t.Fatalf("Status = %+v, %v, %v", s, held, err)
	}
	if err := l.Release(clCtx(t, requestTimeout)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	m := c.NewMutex("failover-mutex")
	if err := m.LockContext(clCtx(t, requestTimeout)); err != nil {
		t.Fatalf("Mutex.Lock: %v", err)
	}
	if ok, err := m.UnlockContext(clCtx(t, requestTimeout)); !ok || err != nil {
		t.Fatalf("Mutex.Unlock: %v, %v", ok, err)
	}
	members, err := c.Members(clCtx(t, requestTimeout))
	if err != nil || len(members) != 3 {
		t.Fatalf("Members = %v, %v", members, err)
	}
	if _, err := c.TryAcquire(clCtx(t, requestTimeout), ""); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("a bad request after failover = %v, want ErrInvalidArgument", err)
	}
	if err := holder.Release(clCtx(t, requestTimeout)); err != nil {
		t.Fatalf("the holder's Release after failover: %v", err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("the waiter: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter did not get the lock within 20s of its release")
	}
}
