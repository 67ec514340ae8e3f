package fenceredis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence/fenceredis"
	"github.com/fencerlock/fencer/internal/fencetest"
	"github.com/fencerlock/fencer/internal/redistest"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSetHSetDel(t *testing.T) {
	ctx := context.Background()
	c := client(t, redistest.Start(t))
	s := fenceredis.New(c)

	if _, ok, err := s.Highest(ctx, "k"); ok || err != nil {
		t.Fatalf("Highest of a new key: %v, %v", ok, err)
	}
	must(t, s.Set(ctx, "k", 5, "five", 0))
	must(t, s.Set(ctx, "k", 5, "five again", 0))
	fencetest.WantStale(t, s.Set(ctx, "k", 4, "four", 0), "k", 4, 5)
	if v := c.Get(ctx, "k").Val(); v != "five again" {
		t.Errorf("k = %q after a refused write, want %q", v, "five again")
	}
	must(t, s.Set(ctx, "k", 8, "eight", 10*time.Second))
	if v, ttl := c.Get(ctx, "k").Val(), c.PTTL(ctx, "k").Val(); v != "eight" || ttl <= 0 || ttl > 10*time.Second {
		t.Errorf("k = %q with PTTL %v, want eight with at most 10s", v, ttl)
	}
	if h, ok, err := s.Highest(ctx, "k"); h != 8 || !ok || err != nil {
		t.Errorf("Highest = %d, %v, %v; want 8", h, ok, err)
	}

	must(t, s.HSet(ctx, "h", 3, "name", "ada", "role", "admin"))
	must(t, s.HSet(ctx, "h", 4, "role", "user"))
	fencetest.WantStale(t, s.HSet(ctx, "h", 3, "role", "root"), "h", 3, 4)
	if got := c.HGetAll(ctx, "h").Val(); fmt.Sprint(got) != "map[name:ada role:user]" {
		t.Errorf("h = %v, want name ada, role user", got)
	}
	if err := s.HSet(ctx, "h", 9, "role"); !errors.Is(err, fenceredis.ErrOddArguments) {
		t.Errorf("HSet with a field and no value: %v", err)
	}

	// A delete keeps the token: the stale writer cannot bring the key back.
	must(t, s.Del(ctx, "k", 9))
	fencetest.WantStale(t, s.Set(ctx, "k", 8, "eight, late", 0), "k", 8, 9)
	if n := c.Exists(ctx, "k").Val(); n != 0 {
		t.Errorf("k exists after a fenced DEL and a stale SET")
	}
	must(t, s.Set(ctx, "k", 9, "nine", 0))
	if v := c.Get(ctx, "k").Val(); v != "nine" {
		t.Errorf("k = %q, want nine", v)
	}
}

// TestFailedWriteChangesNothing: a write that Redis refuses (wrong type)
// does not record its token.
func TestFailedWriteChangesNothing(t *testing.T) {
	ctx := context.Background()
	c := client(t, redistest.Start(t))
	s := fenceredis.New(c)
	must(t, s.Set(ctx, "k", 2, "a string", 0))
	err := s.HSet(ctx, "k", 7, "f", "v")
	if err == nil || !regexp.MustCompile("WRONGTYPE").MatchString(err.Error()) {
		t.Fatalf("HSET on a string: %v, want WRONGTYPE", err)
	}
	if h, _, _ := s.Highest(ctx, "k"); h != 2 {
		t.Errorf("Highest = %d after a failed write with 7, want 2", h)
	}
	must(t, s.Set(ctx, "k", 3, "still mine", 0))
}

// TestLargeTokens: tokens are compared exactly, beyond 2^53 where Lua's
// doubles would round, and across a change of length.
func TestLargeTokens(t *testing.T) {
	ctx := context.Background()
	c := client(t, redistest.Start(t))
	s := fenceredis.New(c)
	must(t, s.Set(ctx, "k", 9, "x", 0))
	must(t, s.Set(ctx, "k", 10, "x", 0))
	fencetest.WantStale(t, s.Set(ctx, "k", 9, "x", 0), "k", 9, 10)
	const big = 1<<53 + 1 // 9007199254740993: as a double, equal to 1<<53
	must(t, s.Set(ctx, "k", big, "x", 0))
	fencetest.WantStale(t, s.Set(ctx, "k", big-1, "x", 0), "k", big-1, big)
	must(t, s.Set(ctx, "k", 1<<64-1, "x", 0))
	fencetest.WantStale(t, s.Set(ctx, "k", 1<<64-2, "x", 0), "k", 1<<64-2, 1<<64-1)
}

func TestWithTokenKey(t *testing.T) {
	ctx := context.Background()
	c := client(t, redistest.Start(t))
	s := fenceredis.New(c, fenceredis.WithTokenKey(func(key string) string { return "tokens:" + key }))
	must(t, s.Set(ctx, "k", 12, "v", 0))
	if v := c.Get(ctx, "tokens:k").Val(); v != "12" {
		t.Errorf("tokens:k = %q, want 12", v)
	}
	if n := c.Exists(ctx, "fence:{k}").Val(); n != 0 {
		t.Error("the default token key was written too")
	}
}

// TestConcurrentInterleavedTokens: holders with tokens 1..n SET and DEL one
// key, and HSET another, at once; holder h starts 2(h-1) ms after the first.
// MONITOR shows what landed, in order: every admitted write records its
// token in the key's token key inside the script. Landed tokens must never
// go down, and the newest holder must never be refused.
func TestConcurrentInterleavedTokens(t *testing.T) {
	const holders, writes = 8, 30
	ctx := context.Background()
	srv := redistest.Start(t)
	mon := startMonitor(t, srv)
	s := fenceredis.New(client(t, srv))
	refused := fencetest.Writers(t, holders, writes, func(token uint64, i int) (bool, error) {
		value := fmt.Sprintf("holder %d write %d", token, i)
		switch rand.IntN(3) {
		case 0:
			return fencetest.Refusal(token, s.Set(ctx, "doc", token, value, 0))
		case 1:
			return fencetest.Refusal(token, s.Del(ctx, "doc", token))
		default:
			return fencetest.Refusal(token, s.HSet(ctx, "hash", token, "by", value))
		}
	})
	client(t, srv).Echo(ctx, "end of test writes")
	landed := map[string][]uint64{}
	re := regexp.MustCompile(`\[\d+ lua\] "SET" "fence:\{(doc|hash)\}" "(\d+)"`)
	for _, line := range mon.until(t, "end of test writes") {
		if m := re.FindStringSubmatch(line); m != nil {
			tok, _ := strconv.ParseUint(m[2], 10, 64)
			landed[m[1]] = append(landed[m[1]], tok)
		}
	}
	fencetest.CheckHistory(t, refused, holders, writes, landed["doc"], landed["hash"])
	if got := client(t, srv).HGet(ctx, "hash", "by").Val(); !regexp.MustCompile(fmt.Sprintf("^holder %d ", holders)).MatchString(got) {
		t.Errorf("hash holds %q, want the newest holder's write", got)
	}
}
