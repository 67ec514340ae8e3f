package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/internal/resp"
)

// Watches of a prefix (FENCE.WATCH PREFIX, docs/protocol.md) and the
// client identity of each holder (FENCE.LOCKS) against real fencerd
// processes, across the leader's death.

// pEvent is one fence.pevent (or client event of a prefix watch).
type pEvent struct {
	key string
	wEvent
}

// watchRawPrefix opens a RESP3 connection to addr and sends FENCE.WATCH
// PREFIX prefix; it reads the replies up to the confirmation.
func watchRawPrefix(t *testing.T, addr, prefix string) *rawWatcher {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	w := &rawWatcher{t: t, conn: conn, rd: bufio.NewReader(conn)}
	if _, err := conn.Write(append(resp.Command("HELLO", "3"), resp.Command("FENCE.WATCH", "PREFIX", prefix)...)); err != nil {
		t.Fatal(err)
	}
	if v := w.read(10 * time.Second); v.Kind != resp.Map {
		t.Fatalf("HELLO 3: %v", v)
	}
	if v := w.read(10 * time.Second); v.Kind != resp.Push || len(v.Elems) != 3 || v.Elems[0].Str != "fence.pwatch" || v.Elems[1].Str != prefix {
		t.Fatalf("FENCE.WATCH PREFIX: %v", v)
	}
	return w
}

func (w *rawWatcher) nextPrefix(within time.Duration) pEvent {
	w.t.Helper()
	v := w.read(within)
	if v.Kind != resp.Push || len(v.Elems) != 8 || v.Elems[0].Str != "fence.pevent" {
		w.t.Fatalf("not a prefix event: %v", v)
	}
	return pEvent{v.Elems[2].Str, wEvent{kind: v.Elems[3].Str, owner: v.Elems[5].Str, pos: uint64(v.Elems[4].Int), token: uint64(v.Elems[6].Int)}}
}

// collectPrefix reads events from next until, for each key of last, the
// grant with that token has ended.
func collectPrefix(t *testing.T, next func() (pEvent, bool), last map[string]uint64) []pEvent {
	t.Helper()
	var out []pEvent
	open := len(last)
	for open > 0 {
		e, ok := next()
		if !ok {
			t.Fatalf("the watch ended after %d events", len(out))
		}
		out = append(out, e)
		if tok, ok := last[e.key]; ok && e.kind != "granted" && e.kind != "reset" && e.token == tok {
			open--
		}
	}
	return out
}

// byKey is a prefix watch's events of one key.
func byKey(evs []pEvent, key string) []wEvent {
	var out []wEvent
	for _, e := range evs {
		if e.key == key {
			out = append(out, e.wEvent)
		}
	}
	return out
}

// The leader dies while two locks under a prefix (and one outside it)
// change hands: a raw prefix watcher on a follower and a client's prefix
// watch that started on the leader (it resumes on another node from its
// last position) each see every grant of both locks, once, in order, no
// event of the other lock, and no reset; the two streams agree event for
// event, position for position, from where both began.
func TestWatchPrefixAcrossLeaderDeath(t *testing.T) {
	cl := clStartCluster(t)
	old := cl.leader(t, clFormTimeout)
	follower, other := (old+1)%3, (old+2)%3

	fw := watchRawPrefix(t, cl.nodes[follower].addr, "pw:")
	first := fw.nextPrefix(10 * time.Second)
	if first.kind != "reset" || first.key != "" {
		t.Fatalf("first event %+v, want a reset naming no key", first)
	}
	wc := clNew(t, cl.addrs(old, follower, other), client.WithRequestTimeout(2*time.Second))
	cw, err := wc.WatchPrefix(clCtx(t, 2*time.Minute), "pw:")
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	cfirst := <-cw.Events()
	if cfirst.Kind != client.EventReset || cfirst.Name != "" {
		t.Fatalf("first client event %+v, want a reset naming no key", cfirst)
	}

	changers := map[string]*changer{}
	for _, k := range []string{"pw:a", "pw:b", "other:c"} {
		changers[k] = startChanger(t, clNew(t, cl.addrs()), k)
	}
	changers["pw:a"].awaitMore(t, 15, 30*time.Second)
	killed := time.Now()
	cl.nodes[old].kill9(t)
	now := cl.leader(t, clElectionTimeout)
	t.Logf("node %d killed; node %d leads after %v", old, now, time.Since(killed).Round(time.Millisecond))
	changers["pw:a"].awaitMore(t, 15, 30*time.Second)
	changers["pw:b"].awaitMore(t, 5, 30*time.Second)
	grants := map[string][]wGrant{}
	last := map[string]uint64{}
	for k, ch := range changers {
		grants[k] = ch.finish(t)
		if strings.HasPrefix(k, "pw:") {
			last[k] = grants[k][len(grants[k])-1].token
		}
	}
	t.Logf("grants: pw:a %d, pw:b %d, other:c %d", len(grants["pw:a"]), len(grants["pw:b"]), len(grants["other:c"]))

	fevs := collectPrefix(t, func() (pEvent, bool) { return fw.nextPrefix(30 * time.Second), true }, last)
	timeout := time.After(30 * time.Second)
	cevs := collectPrefix(t, func() (pEvent, bool) {
		select {
		case e, ok := <-cw.Events():
			return pEvent{e.Name, wEvent{string(e.Kind), e.Owner, e.Position, e.Token}}, ok
		case <-timeout:
			return pEvent{}, false
		}
	}, last)
	for who, evs := range map[string][]pEvent{"follower's watcher": fevs, "client watch": cevs} {
		var lastPos uint64
		for i, e := range evs {
			if !strings.HasPrefix(e.key, "pw:") {
				t.Fatalf("%s: event %d %+v is not under pw:", who, i, e)
			}
			if e.pos < lastPos {
				t.Fatalf("%s: event %d %+v goes back from position %d", who, i, e, lastPos)
			}
			lastPos = e.pos
		}
		for _, k := range []string{"pw:a", "pw:b"} {
			if n := checkHistory(t, who+" "+k, byKey(evs, k), grants[k]); n != 0 {
				t.Fatalf("%s: %d resets of %s", who, n, k)
			}
		}
	}
	// The same events at the same positions from where both began.
	from := max(first.pos, cfirst.Position)
	trim := func(evs []pEvent) []pEvent {
		for i, e := range evs {
			if e.pos > from {
				return evs[i:]
			}
		}
		return nil
	}
	fa, ca := trim(fevs), trim(cevs)
	if len(fa) != len(ca) {
		t.Fatalf("the follower's watcher saw %d events after position %d, the resumed client watch %d", len(fa), from, len(ca))
	}
	for i := range fa {
		if fa[i] != ca[i] {
			t.Fatalf("event %d: follower %+v, client %+v", i, fa[i], ca[i])
		}
	}
	t.Logf("both streams: %d events after position %d, identical; the client's crossed the kill of the node it watched on", len(fa), from)
}

// fencer watch without NAME, and with --prefix, follows every lock (under
// the prefix) across the leader's death: each change printed once, naming
// its lock, in position order, in table and JSON output.
func TestOperatorWatchPrefixAcrossLeaderKill(t *testing.T) {
	c := startNodeCluster(t, 3)
	bin := clFencerBin(t)
	// The leader's address first: the watches start on the node killed.
	leader := c.leader(t)
	addrs := []string{c.nodes[leader].addr}
	for _, i := range c.others(leader) {
		addrs = append(addrs, c.nodes[i].addr)
	}
	start := func(args ...string) *syncBuffer {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "FENCER_ADDR="+strings.Join(addrs, ","))
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return &out
	}
	all := start("watch")
	jobs := start("watch", "--prefix", "job:", "-o", "json")
	waitFor := func(out *syncBuffer, what string, re *regexp.Regexp) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !re.MatchString(out.String()); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("fencer watch never printed %s:\n%s", what, out.String())
			}
		}
	}
	waitFor(all, "the reset at the start", regexp.MustCompile(`position=\d+ reset`))
	waitFor(jobs, "the reset at the start", regexp.MustCompile(`"kind":"reset"`))
	g1 := c.mustGrant(t, leader, clusterRetryWithin, "job:1", "alice", time.Minute)
	g0 := c.mustGrant(t, leader, clusterRetryWithin, "other:1", "carol", time.Minute)
	waitFor(all, "alice's grant", regexp.MustCompile(fmt.Sprintf(`granted name=job:1 owner=alice token=%d`, g1.token)))
	waitFor(all, "carol's grant", regexp.MustCompile(fmt.Sprintf(`granted name=other:1 owner=carol token=%d`, g0.token)))
	c.nodes[leader].kill9(t)
	killedAt := time.Now()
	next, _ := c.awaitNewLeader(t, c.others(leader), c.ids[leader], killedAt, clusterElectionTimeout)
	if v, err := clusterCall(c.nodes[next].addr, clusterServerTimeout, "FENCE.RELEASE", "job:1", "alice"); err != nil || v != int64(1) {
		t.Fatalf("alice's release under the new leader: %v %v", v, err)
	}
	g2 := c.mustGrant(t, next, clusterRetryWithin, "job:2", "bob", time.Minute)
	waitFor(all, "bob's grant after the leader's death", regexp.MustCompile(fmt.Sprintf(`granted name=job:2 owner=bob token=%d`, g2.token)))
	waitFor(jobs, "bob's grant after the leader's death", regexp.MustCompile(fmt.Sprintf(`"token":%d`, g2.token)))
	text := all.String()
	t.Logf("fencer watch across the kill of %s (%v before bob's grant showed):\n%s", c.ids[leader], time.Since(killedAt).Round(time.Millisecond), text)
	var got []string
	last := uint64(0)
	for _, m := range regexp.MustCompile(`position=(\d+) (\w+)(?: name=(\S+))?`).FindAllStringSubmatch(text, -1) {
		pos, _ := strconv.ParseUint(m[1], 10, 64)
		if pos < last {
			t.Fatalf("position %d after %d:\n%s", pos, last, text)
		}
		last = pos
		got = append(got, strings.TrimSpace(m[2]+" "+m[3]))
	}
	if want := "reset|granted job:1|granted other:1|released job:1|granted job:2"; strings.Join(got, "|") != want {
		t.Fatalf("events %q, want %q:\n%s", strings.Join(got, "|"), want, text)
	}
	t.Logf("fencer watch --prefix job: -o json:\n%s", jobs.String())
	var kinds []string
	last = 0
	for _, line := range strings.Split(strings.TrimSpace(jobs.String()), "\n") {
		var e struct {
			Kind     string `json:"kind"`
			Name     string `json:"name"`
			Position uint64 `json:"position"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		if e.Position < last {
			t.Fatalf("position %d after %d", e.Position, last)
		}
		last = e.Position
		kinds = append(kinds, strings.TrimSpace(e.Kind+" "+e.Name))
	}
	if want := "reset|granted job:1|released job:1|granted job:2"; strings.Join(kinds, "|") != want {
		t.Fatalf("JSON events %q, want %q", strings.Join(kinds, "|"), want)
	}
}

// A lock taken through a follower by a named client shows, at the leader,
// that client's user, address and name; after the leader's death the new
// leader has no record of it and says unknown, never another client; a
// lock the new leader grants shows its own client.
func TestOperatorLockClientAcrossLeaderKill(t *testing.T) {
	c := startNodeCluster(t, 3)
	bin := clFencerBin(t)
	leader := c.leader(t)
	follower := c.others(leader)[0]
	conn, err := net.DialTimeout("tcp", testHostAddr(c.nodes[follower].addr), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	for _, cmd := range [][]string{{"CLIENT", "SETNAME", "worker-7"}, {"FENCE.ACQUIRE", "job:x", "holder", "120000"}} {
		if v, err := clusterRoundTrip(conn, rd, clusterServerTimeout, cmd...); err != nil || clusterRetryable(v) {
			t.Fatalf("%v: %v %v", cmd, v, err)
		}
	}
	type listed struct {
		Leader string `json:"leader"`
		Locks  []struct {
			Name    string `json:"name"`
			Holders []struct {
				Owner  string             `json:"owner"`
				Client *client.ClientInfo `json:"client"`
			} `json:"holders"`
		} `json:"locks"`
	}
	list := func(via int, prefix string) (listed, string) {
		t.Helper()
		var l listed
		for deadline := time.Now().Add(clusterRetryWithin); ; time.Sleep(200 * time.Millisecond) {
			out, errOut, code := clFencer(t, bin, c.nodes[via], nil, "locks", prefix, "-o", "json")
			if code == 0 {
				if err := json.Unmarshal([]byte(out), &l); err != nil {
					t.Fatalf("fencer locks -o json: %v\n%s", err, out)
				}
				table, _, _ := clFencer(t, bin, c.nodes[via], nil, "locks", prefix)
				return l, table
			}
			if time.Now().After(deadline) {
				t.Fatalf("fencer locks: exit %d %s", code, errOut)
			}
		}
	}
	l, table := list(follower, "job:")
	t.Logf("fencer locks before the kill:\n%s", table)
	want := client.ClientInfo{User: "default", Addr: conn.LocalAddr().String(), Name: "worker-7"}
	if len(l.Locks) != 1 || len(l.Locks[0].Holders) != 1 || l.Locks[0].Holders[0].Client == nil || *l.Locks[0].Holders[0].Client != want {
		t.Fatalf("the holder's client: %+v, want %+v", l, want)
	}
	if !strings.Contains(table, "default "+want.Addr+" worker-7") {
		t.Fatalf("the table lacks the client:\n%s", table)
	}

	c.nodes[leader].kill9(t)
	next, _ := c.awaitNewLeader(t, c.others(leader), c.ids[leader], time.Now(), clusterElectionTimeout)
	l, table = list(next, "job:")
	t.Logf("fencer locks after the kill (leader %s):\n%s", c.ids[next], table)
	if len(l.Locks) != 1 || len(l.Locks[0].Holders) != 1 || l.Locks[0].Holders[0].Owner != "holder" || l.Locks[0].Holders[0].Client != nil {
		t.Fatalf("after the leader change: %+v, want the holder with no client", l)
	}
	if !strings.Contains(table, "unknown (not recorded by this leader)") {
		t.Fatalf("the table does not say unknown:\n%s", table)
	}
	// The new leader records what it grants.
	// (The follower's connection survived: the follower did.)
	if v, err := clusterRoundTrip(conn, rd, clusterServerTimeout, "FENCE.ACQUIRE", "job:y", "second", "120000"); err != nil || clusterRetryable(v) {
		t.Fatalf("job:y: %v %v", v, err)
	}
	l, _ = list(next, "job:y")
	if len(l.Locks) != 1 || l.Locks[0].Holders[0].Client == nil || *l.Locks[0].Holders[0].Client != want {
		t.Fatalf("job:y's client under the new leader: %+v, want %+v", l, want)
	}
}
