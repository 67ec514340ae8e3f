package integration

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Leader election with epochs, Kleppmann-style (issue 19, "Must show"):
// campaigning processes on a three-node cluster, a store that refuses a
// write whose epoch is below one it admitted (fencingStore: fencehttp's
// middleware on fence.NewMemory). The leader is paused with SIGSTOP
// between its leadership check and its write; the next campaigner is
// elected with a higher epoch once the paused one's session runs out, and
// writes; the paused one resumes and its late write is refused. Then the
// leader is killed with SIGKILL, and the next campaigner in line is
// elected, skipping one whose session ran out while it waited.

// elTTL is the campaigners' session TTL.
const elTTL = 1500 * time.Millisecond

// elName is the election's name.
const elName = "leader"

// elTerm is one campaigner's election, as it printed it.
type elTerm struct {
	who   *scChild
	epoch uint64
	at    time.Time // when the test read "elected"
}

// elElection follows the campaigners' output and checks each election:
// at most one leader per epoch, epochs strictly increasing, and the
// server's record of the leader (FENCE.HOLDER) matching.
type elElection struct {
	t     *testing.T
	cl    *nodeCluster
	cs    []*scChild
	terms []elTerm
}

// next waits until a campaigner is elected and returns its term.
func (e *elElection) next(within time.Duration) elTerm {
	t := e.t
	t.Helper()
	c, l := scAwaitAny(t, e.cs, "elected ", within)
	epoch, err := strconv.ParseUint(strings.TrimPrefix(l.text, "elected "), 10, 64)
	if err != nil {
		t.Fatalf("%s printed %q", c.name, l.text)
	}
	term := elTerm{who: c, epoch: epoch, at: l.at}
	for _, p := range e.terms {
		if p.epoch == epoch {
			t.Fatalf("epoch %d was given to %s and to %s", epoch, p.who.name, c.name)
		}
	}
	if n := len(e.terms); n > 0 && epoch <= e.terms[n-1].epoch {
		t.Fatalf("%s was elected with epoch %d after %s had %d: epochs must increase", c.name, epoch, e.terms[n-1].who.name, e.terms[n-1].epoch)
	}
	e.terms = append(e.terms, term)
	// The leader's record on the server: value and epoch.
	v := e.cl.callRetry(t, e.cl.leader(t), clusterRetryWithin, "FENCE.HOLDER", elName)
	a, ok := v.([]any)
	if !ok || len(a) != 5 {
		t.Fatalf("FENCE.HOLDER %s answered %#v", elName, v)
	}
	if tok, _ := a[1].(int64); uint64(tok) != epoch || a[4] != c.name {
		t.Fatalf("FENCE.HOLDER %s = %v; %s was elected with epoch %d", elName, a, c.name, epoch)
	}
	t.Logf("%s elected with epoch %d", c.name, epoch)
	return term
}

// write has term's leader check that it leads and write "name@epoch" to
// the store with its epoch; it returns the store's status. Unless pause is
// set, the leader is let through its gate at once; with pause, it is
// stopped (SIGSTOP) between its check and its write, and write returns
// without waiting for the write, with the time of the stop.
func (e *elElection) write(term elTerm, pause bool) (status int, paused time.Time) {
	t := e.t
	t.Helper()
	c := term.who
	c.send(t, "write")
	if l := c.await(t, "checked ", clusterReadyTimeout); l.text != fmt.Sprintf("checked %d", term.epoch) {
		t.Fatalf("%s printed %q, want a check of epoch %d", c.name, l.text, term.epoch)
	}
	if pause {
		paused = c.pause(t)
		c.send(t, "go")
		return 0, paused
	}
	c.send(t, "go")
	return e.wrote(term), time.Time{}
}

// wrote waits for term's leader to report its write and returns the
// store's status.
func (e *elElection) wrote(term elTerm) int {
	t := e.t
	t.Helper()
	l := term.who.await(t, "wrote ", clusterReadyTimeout)
	f := strings.Fields(l.text)
	if len(f) != 3 || f[1] != strconv.FormatUint(term.epoch, 10) {
		t.Fatalf("%s printed %q, want \"wrote %d STATUS\"", term.who.name, l.text, term.epoch)
	}
	status, _ := strconv.Atoi(f[2])
	return status
}

func TestElectionFencedStoreRefusesDeposedLeader(t *testing.T) {
	httpOf := make(map[string]string)
	cl := startNodeClusterWith(t, 3, func(d *daemon) { httpOf[d.addr] = scWithHTTP(t, d) })
	var addrs []string
	for _, d := range cl.nodes {
		addrs = append(addrs, d.addr)
	}
	leaderHTTP := httpOf[cl.nodes[cl.leader(t)].addr]
	store := startFencingStore(t, true)
	e := &elElection{t: t, cl: cl}
	sessions := make(map[*scChild]string)
	// They start one at a time, each queued before the next starts (the
	// leader's count of waiters), so that the line is in this order.
	queued := scMetric(t, leaderHTTP, scWaiters)
	for i, name := range []string{"alpha", "beta", "gamma", "delta"} {
		c := scStart(t, name, "campaign", "-addrs", strings.Join(addrs, ","), "-ttl", elTTL.String(),
			"-election", elName, "-name", name, "-store", store.url)
		sessions[c] = strings.TrimPrefix(c.await(t, "campaigning ", clusterReadyTimeout).text, "campaigning ")
		e.cs = append(e.cs, c)
		if i == 0 {
			e.next(clusterReadyTimeout)
		} else {
			scAwaitMetric(t, leaderHTTP, scWaiters, queued+float64(i), clusterReadyTimeout)
		}
	}
	alpha, beta, gamma, delta := e.cs[0], e.cs[1], e.cs[2], e.cs[3]

	// Term 1 writes while it leads.
	first := e.terms[0]
	if first.who != alpha {
		t.Fatalf("%s was elected first; alpha campaigned first, alone", first.who.name)
	}
	if st, _ := e.write(first, false); st != http.StatusNoContent {
		t.Fatalf("%s's write with epoch %d answered %d, want 204", first.who.name, first.epoch, st)
	}

	// Term 1's leader is paused between its check and its write. Its
	// keepalives stop; its session runs out; the next in line is elected.
	_, paused := e.write(first, true)
	t.Logf("alpha paused (SIGSTOP) between its leadership check and its write")
	second := e.next(2*elTTL + clusterElectionTimeout)
	t.Logf("%s elected %v after alpha was paused", second.who.name, second.at.Sub(paused).Round(time.Millisecond))
	if second.who != beta {
		t.Errorf("%s was elected; beta was first in line", second.who.name)
	}
	// The paused one's last keepalive may have been sent up to TTL/3
	// before the pause.
	if d := second.at.Sub(paused); d < elTTL/2 {
		t.Errorf("%s was elected %v after alpha was paused; its session's TTL is %v", second.who.name, d, elTTL)
	}
	if st, _ := e.write(second, false); st != http.StatusNoContent {
		t.Fatalf("%s's write with epoch %d answered %d, want 204", second.who.name, second.epoch, st)
	}

	// The paused ex-leader resumes and writes with its old epoch.
	alpha.resume(t)
	if st := e.wrote(first); st != http.StatusConflict {
		t.Errorf("alpha's late write with epoch %d (after epoch %d) answered %d, want 409", first.epoch, second.epoch, st)
	}
	// It learns it was deposed, and acts on it.
	alpha.awaitPrinted(t, fmt.Sprintf("deposed %d", first.epoch), clusterReadyTimeout)
	alpha.send(t, "write")
	alpha.await(t, fmt.Sprintf("lost %d", first.epoch), clusterReadyTimeout)

	// gamma, next in line, is paused until its session has ended on the
	// server: a waiter whose session is gone is not elected.
	gamma.pause(t)
	deadline := time.Now().Add(2*elTTL + clusterRetryWithin)
	for cl.callRetry(t, cl.leader(t), clusterRetryWithin, "FENCE.SESSION", "INFO", sessions[gamma]) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("gamma's session %s still open %v after gamma was paused (TTL %v)", sessions[gamma], 2*elTTL+clusterRetryWithin, elTTL)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Term 2's leader is killed; delta is elected once its session runs
	// out.
	killed := second.who.kill9(t)
	t.Logf("%s killed (SIGKILL)", second.who.name)
	third := e.next(2*elTTL + clusterElectionTimeout)
	t.Logf("%s elected %v after %s was killed", third.who.name, third.at.Sub(killed).Round(time.Millisecond), second.who.name)
	if third.who != delta {
		t.Fatalf("%s was elected; delta was the only campaigner in line with a session", third.who.name)
	}
	if d := third.at.Sub(killed); d < elTTL/2 {
		t.Errorf("%s was elected %v after %s was killed; its session's TTL is %v", third.who.name, d, second.who.name, elTTL)
	}
	if st, _ := e.write(third, false); st != http.StatusNoContent {
		t.Fatalf("%s's write with epoch %d answered %d, want 204", third.who.name, third.epoch, st)
	}

	// gamma resumes: its campaign ends in an error, never in an election.
	gamma.resume(t)
	select {
	case <-gamma.exited:
	case <-time.After(2*elTTL + clusterRetryWithin):
		t.Fatalf("gamma still campaigns %v after it resumed; its session had ended", 2*elTTL+clusterRetryWithin)
	}
	gammaErr, _ := os.ReadFile(gamma.errPath)
	t.Logf("gamma's campaign ended: %s", strings.TrimSpace(string(gammaErr)))
	if code := gamma.cmd.ProcessState.ExitCode(); code != 1 || len(gamma.printed("elected ")) > 0 {
		t.Errorf("gamma, whose session ended while it waited, exited %d and printed %v; want exit 1 and no election", code, gamma.printed("elected "))
	}

	// The store: every leader's write admitted in epoch order, the late
	// one refused, and the last leader's value kept.
	value, log := store.snapshot()
	var got []string
	for _, w := range log {
		got = append(got, fmt.Sprintf("%s %s %d", w.token, w.value, w.status))
	}
	want := []string{
		fmt.Sprintf("%d %s@%d 204", first.epoch, first.who.name, first.epoch),
		fmt.Sprintf("%d %s@%d 204", second.epoch, second.who.name, second.epoch),
		fmt.Sprintf("%d %s@%d 409", first.epoch, first.who.name, first.epoch),
		fmt.Sprintf("%d %s@%d 204", third.epoch, third.who.name, third.epoch),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the store saw\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if w := fmt.Sprintf("%s@%d", third.who.name, third.epoch); value != w {
		t.Errorf("the store holds %q, want %q", value, w)
	}
	// No campaigner was told it was elected more than once.
	for _, c := range e.cs {
		if n := len(c.printed("elected ")); n > 1 {
			t.Errorf("%s was elected %d times", c.name, n)
		}
	}
}
