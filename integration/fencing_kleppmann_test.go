package integration

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence/fencehttp"
	"github.com/fencerlock/fencer/fence/fenceredis"
	"github.com/fencerlock/fencer/internal/redistest"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// The scenario of Kleppmann's "How to do distributed locking", for real:
// client 1 (a separate process) takes the lock, checks its lease, and is
// paused with SIGSTOP before its write, past the end of its lease. Client 2
// takes the lock and writes. Client 1 resumes and writes. With fencer's
// token the store refuses client 1; with redsync (Redlock on five Redis
// servers) and a store that cannot check anything, client 1's stale write
// lands on top of client 2's. `make demo` runs these tests and shows what
// happens.

const (
	// fencingTTL is client 1's lease: the SIGSTOP outlasts it.
	fencingTTL = 4 * time.Second
	// fencingHold is client 2's lease: it outlives the whole scenario, so
	// client 2 still holds the lock when client 1's write arrives.
	fencingHold = 60 * time.Second
	// fencingStep bounds each step; a step that waits for client 1's lease
	// to run out takes fencingTTL at most.
	fencingStep = 30 * time.Second
)

const (
	fencingValue1 = "report by client 1 (stale)"
	fencingValue2 = "report by client 2"
)

var fencingTokenRE = regexp.MustCompile(`token (\d+)`)

// fencingToken returns the token named in a line of client 1's output.
func fencingToken(t *testing.T, line string) uint64 {
	t.Helper()
	m := fencingTokenRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no token in %q", line)
	}
	tok, _ := strconv.ParseUint(m[1], 10, 64)
	return tok
}

// fencingPauseClient1 waits until client 1 has checked its lease, stops it
// with SIGSTOP, and only then lets it past the point where it would write.
func fencingPauseClient1(t *testing.T, story *fencingStory, p *fencingProcess) time.Time {
	t.Helper()
	p.expect(t, "lease valid", fencingStep)
	p.pause(t)
	p.openGate(t)
	story.say("test     │ SIGSTOP client 1 (pid %d) between its lease check and its write", p.cmd.Process.Pid)
	return time.Now()
}

// fencingResumeClient1 sends SIGCONT to client 1, paused since paused, and
// returns what the store answered to its write once it has exited.
func fencingResumeClient1(t *testing.T, story *fencingStory, p *fencingProcess, paused time.Time) string {
	t.Helper()
	story.say("test     │ SIGCONT client 1 after %.2fs paused", time.Since(paused).Seconds())
	p.resume(t)
	answer := p.expect(t, "store answered", fencingStep)
	p.wait(t)
	return answer
}

// fencingAcquire is client 2 taking fencer's lock with FENCE.ACQUIRE …
// WAIT: it is granted as soon as client 1's lease expires. That must not
// be before fencingTTL after client 1 sent its acquire (DESIGN.md, invariant
// 3), which was after client 1's process started: a grant received earlier
// than fencingTTL after that start is a server bug.
func fencingAcquire(t *testing.T, story *fencingStory, d *daemon, key string, client1 *fencingProcess) uint64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: d.addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		ReadTimeout: 2 * fencingStep})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*fencingStep)
	defer cancel()
	story.say("client 2 │ FENCE.ACQUIRE %s client-2 %d WAIT %d", key, fencingHold.Milliseconds(), fencingStep.Milliseconds())
	reply, err := c.Do(ctx, "FENCE.ACQUIRE", key, "client-2", fencingHold.Milliseconds(), "WAIT", fencingStep.Milliseconds()).Slice()
	if err != nil {
		t.Fatalf("client 2: FENCE.ACQUIRE: %v", err)
	}
	tok, ok := reply[0].(int64)
	if !ok || len(reply) != 2 {
		t.Fatalf("client 2: FENCE.ACQUIRE answered %v", reply)
	}
	if early := time.Until(client1.started.Add(fencingTTL)); early > 0 {
		t.Errorf("client 2 was granted the lock %v before client 1's lease could have ended", early)
	}
	return uint64(tok)
}

// fencingPut is client 2's write to the HTTP store, which must accept it;
// with a token (> 0) it goes through fencehttp's Transport.
func fencingPut(t *testing.T, story *fencingStory, url string, token uint64) {
	t.Helper()
	hc := &http.Client{Timeout: fencingStep}
	if token > 0 {
		hc.Transport = &fencehttp.Transport{Source: fencehttp.TokenFunc(func() uint64 { return token })}
	}
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(fencingValue2))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("client 2: writing to the store: %v", err)
	}
	resp.Body.Close()
	if token > 0 {
		story.say("client 2 │ wrote %q with token %d: store answered %d", fencingValue2, token, resp.StatusCode)
	} else {
		story.say("client 2 │ wrote %q: store answered %d", fencingValue2, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("client 2's write answered %d, want 204", resp.StatusCode)
	}
}

// TestFencingKleppmannFencerHTTPStore: fencer's token, checked by an HTTP
// store behind fencehttp's middleware, stops the paused client's write.
func TestFencingKleppmannFencerHTTPStore(t *testing.T) {
	story := newFencingStory(t, "fencer + fenced HTTP store: a client paused past its lease cannot overwrite its successor")
	d := startFencerd(t)
	fencingWaitLeader(t, d)
	store := startFencingStore(t, true)
	story.say("setup    │ fencerd at %s; store at %s behind fencehttp.Middleware", d.addr, store.url)

	p := startFencingClient(t, story, "-lock", "fencer", "-fencer", d.addr, "-key", "report", "-owner", "client-1",
		"-ttl", fencingTTL.String(), "-store", store.url, "-value", fencingValue1)
	tok1 := fencingToken(t, p.expect(t, "acquired", fencingStep))
	paused := fencingPauseClient1(t, story, p)

	tok2 := fencingAcquire(t, story, d, "report", p)
	story.say("client 2 │ acquired lock \"report\": token %d, %.2fs after client 1 was paused (client 1's lease ran out)",
		tok2, time.Since(paused).Seconds())
	fencingPut(t, story, store.url, tok2)

	answer := fencingResumeClient1(t, story, p, paused)

	value, log := store.snapshot()
	story.say("result   │ store holds %q", value)
	if tok2 <= tok1 {
		t.Errorf("client 2's token %d is not above client 1's %d", tok2, tok1)
	}
	wantAnswer := fmt.Sprintf(`409 Conflict: fence: stale token %d for "/report": token %d was already admitted`, tok1, tok2)
	if !strings.Contains(answer, wantAnswer) {
		t.Errorf("client 1 was told %q, want %q", answer, wantAnswer)
	}
	if value != fencingValue2 {
		t.Errorf("store holds %q, want client 2's %q", value, fencingValue2)
	}
	want := fmt.Sprintf("[{%d %s 204} {%d %s 409}]", tok2, fencingValue2, tok1, fencingValue1)
	var got []string
	for _, w := range log {
		got = append(got, fmt.Sprintf("{%s %s %d}", w.token, w.value, w.status))
	}
	if "["+strings.Join(got, " ")+"]" != want {
		t.Errorf("store saw writes %v, want %s", got, want)
	}
}

// TestFencingKleppmannFencerRedisStore: the same with Redis as the store,
// written through fenceredis.
func TestFencingKleppmannFencerRedisStore(t *testing.T) {
	story := newFencingStory(t, "fencer + fenced Redis store: the stale SET is refused by the Lua script")
	d := startFencerd(t)
	fencingWaitLeader(t, d)
	storeRedis := redistest.Start(t)
	storeURL := "redis://" + storeRedis.Addr + "/report"
	story.say("setup    │ fencerd at %s; store is redis-server %s, written through fenceredis", d.addr, storeRedis.Addr)

	p := startFencingClient(t, story, "-lock", "fencer", "-fencer", d.addr, "-key", "report", "-owner", "client-1",
		"-ttl", fencingTTL.String(), "-store", storeURL, "-value", fencingValue1)
	tok1 := fencingToken(t, p.expect(t, "acquired", fencingStep))
	paused := fencingPauseClient1(t, story, p)

	tok2 := fencingAcquire(t, story, d, "report", p)
	story.say("client 2 │ acquired lock \"report\": token %d, %.2fs after client 1 was paused", tok2, time.Since(paused).Seconds())
	rc := redis.NewClient(&redis.Options{Addr: storeRedis.Addr})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), fencingStep)
	defer cancel()
	if err := fenceredis.New(rc).Set(ctx, "report", tok2, fencingValue2, 0); err != nil {
		t.Fatalf("client 2's fenced SET: %v", err)
	}
	story.say("client 2 │ fenced SET report %q with token %d: OK", fencingValue2, tok2)

	answer := fencingResumeClient1(t, story, p, paused)

	value, err := rc.Get(ctx, "report").Result()
	if err != nil {
		t.Fatal(err)
	}
	story.say("result   │ store holds %q", value)
	wantAnswer := fmt.Sprintf(`refused: fence: stale token %d for "report": token %d was already admitted`, tok1, tok2)
	if tok2 <= tok1 || !strings.Contains(answer, wantAnswer) {
		t.Errorf("client 1 (token %d) was told %q, want %q", tok1, answer, wantAnswer)
	}
	if value != fencingValue2 {
		t.Errorf("store holds %q, want client 2's %q", value, fencingValue2)
	}
}

// TestFencingKleppmannRedsyncCorrupts: redsync's Redlock on five real Redis
// servers gives no token, the store cannot tell the writers apart, and the
// paused client's write lands on top of client 2's while client 2 still
// holds the lock. This test passes when the corruption happens: it shows
// what fencer's tokens are for.
func TestFencingKleppmannRedsyncCorrupts(t *testing.T) {
	story := newFencingStory(t, "redsync (Redlock, 5 Redis servers) + plain store: the paused client corrupts the data")
	servers := redistest.StartN(t, 5)
	var addrs []string
	var pools []redsyncredis.Pool
	for _, s := range servers {
		addrs = append(addrs, s.Addr)
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		defer c.Close()
		pools = append(pools, goredis.NewPool(c))
	}
	store := startFencingStore(t, false)
	story.say("setup    │ redis-server at %s; plain store at %s", strings.Join(addrs, ", "), store.url)

	p := startFencingClient(t, story, "-lock", "redlock", "-redis", strings.Join(addrs, ","), "-key", "report",
		"-ttl", fencingTTL.String(), "-store", store.url, "-value", fencingValue1)
	p.expect(t, "acquired", fencingStep)
	paused := fencingPauseClient1(t, story, p)

	m := redsync.New(pools...).NewMutex("report", redsync.WithExpiry(fencingHold),
		redsync.WithTries(int(2*fencingStep/(100*time.Millisecond))), redsync.WithRetryDelay(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*fencingStep)
	defer cancel()
	story.say("client 2 │ redsync Lock(\"report\"), retrying every 100ms")
	if err := m.LockContext(ctx); err != nil {
		t.Fatalf("client 2: redsync lock: %v", err)
	}
	held := m.Until()
	story.say("client 2 │ acquired lock \"report\", %.2fs after client 1 was paused; valid until +%.2fs",
		time.Since(paused).Seconds(), held.Sub(story.start).Seconds())
	fencingPut(t, story, store.url, 0)

	answer := fencingResumeClient1(t, story, p, paused)

	value, log := store.snapshot()
	story.say("result   │ store holds %q: client 2's write is lost, and client 2 still holds the lock", value)
	if !strings.Contains(answer, "204 No Content") {
		t.Errorf("client 1 was told %q, want 204 No Content", answer)
	}
	if value != fencingValue1 {
		t.Errorf("store holds %q; the scenario expects client 1's stale write %q to have landed", value, fencingValue1)
	}
	if len(log) != 2 || log[0].value != fencingValue2 || log[1].value != fencingValue1 {
		t.Fatalf("store saw %+v, want client 2's write, then client 1's", log)
	}
	if !log[1].at.Before(held) {
		t.Errorf("client 1's write landed after client 2's lease ended; the scenario wants it inside")
	}
	if ok, err := m.UnlockContext(ctx); !ok || err != nil {
		t.Errorf("client 2's unlock: %v, %v", ok, err)
	}
}
