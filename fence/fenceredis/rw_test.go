package fenceredis_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence"
	"github.com/fencerlock/fencer/fence/fenceredis"
	"github.com/fencerlock/fencer/internal/fencetest"
	"github.com/fencerlock/fencer/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// rwStep is one operation of a scripted history: a read or a write with a
// token, and the token that refuses it (0 if admitted). The histories are
// fence.RWMemory's (fence/rw_test.go), the reference.
type rwStep struct {
	write     bool
	token     uint64
	staleOver uint64
}

func read(token, staleOver uint64) rwStep  { return rwStep{false, token, staleOver} }
func write(token, staleOver uint64) rwStep { return rwStep{true, token, staleOver} }

var rwCases = []struct {
	name         string
	steps        []rwStep
	wantW, wantH uint64
}{
	{"fresh resource: a read", []rwStep{read(4, 0)}, 0, 4},
	{"fresh resource: a write", []rwStep{write(4, 0)}, 4, 4},
	{"token zero on a fresh resource", []rwStep{read(0, 0), write(0, 0)}, 0, 0},
	{"paused reader", []rwStep{read(5, 0), read(7, 0), write(9, 0), read(5, 9), read(7, 9), read(9, 0)}, 9, 9},
	{"paused writer", []rwStep{
		write(5, 0), read(8, 0), read(9, 0), write(5, 9),
		write(12, 0), write(5, 12), read(8, 12), read(9, 12), read(12, 0),
	}, 12, 12},
	{"readers hold together", []rwStep{read(8, 0), read(7, 0), read(8, 0), read(6, 0)}, 0, 8},
	{"a write equal to W is a retry", []rwStep{write(9, 0), write(9, 0), write(9, 0)}, 9, 9},
	{"a writer reads its own writes", []rwStep{write(9, 0), read(9, 0), write(9, 0)}, 9, 9},
	{"downgrade, readers join", []rwStep{write(9, 0), read(9, 0), read(11, 0), write(9, 11), read(9, 0)}, 9, 11},
	{"a write below a reader's token", []rwStep{read(20, 0), write(19, 20), write(21, 0), read(20, 21)}, 21, 21},
	{"a refusal changes nothing", []rwStep{write(10, 0), read(3, 10), write(4, 10), read(10, 0)}, 10, 10},
	{"tokens beyond 2^53", []rwStep{
		write(9, 0), read(10, 0), write(9, 10), // across a change of length
		write(1<<53+1, 0), read(1<<53, 1<<53+1), read(1<<64-1, 0), write(1<<64-2, 1<<64-1), write(1<<64-1, 0),
	}, 1<<64 - 1, 1<<64 - 1},
}

// TestRWStoreCases runs the scripted histories with GET and SET, each
// write setting the value to its token: every admitted read must see the
// last admitted write.
func TestRWStoreCases(t *testing.T) {
	ctx := context.Background()
	c := client(t, redistest.Start(t))
	s := fenceredis.NewRW(c)
	for i, tc := range rwCases {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("doc%d", i)
			if _, _, ok, err := s.Tokens(ctx, key); ok || err != nil {
				t.Fatalf("Tokens of a new key: %v, %v", ok, err)
			}
			last := ""
			for j, st := range tc.steps {
				var err error
				var got string
				if st.write {
					err = s.Set(ctx, key, st.token, fmt.Sprint(st.token), 0)
				} else {
					got, err = s.Get(ctx, key, st.token)
					if errors.Is(err, redis.Nil) && last == "" {
						err = nil
					}
				}
				if st.staleOver != 0 {
					fencetest.WantStale(t, err, key, st.token, st.staleOver)
					continue
				}
				if err != nil {
					t.Fatalf("step %d (write %v, token %d): %v", j, st.write, st.token, err)
				}
				if st.write {
					last = fmt.Sprint(st.token)
				} else if got != last {
					t.Fatalf("step %d: read %d got %q, want %q", j, st.token, got, last)
				}
			}
			if v := c.Get(ctx, key).Val(); v != last {
				t.Errorf("%s holds %q, want %q", key, v, last)
			}
			w, h, ok, err := s.Tokens(ctx, key)
			if w != tc.wantW || h != tc.wantH || !ok || err != nil {
				t.Errorf("Tokens = %d, %d, %v, %v; want W %d, H %d", w, h, ok, err, tc.wantW, tc.wantH)
			}
		})
	}
}

func TestRWStoreHashesAndDel(t *testing.T) {
	ctx := context.Background()
	c := client(t, redistest.Start(t))
	s := fenceredis.NewRW(c)
	if m, err := s.HGetAll(ctx, "h", 3); err != nil || len(m) != 0 {
		t.Fatalf("HGetAll of a missing hash: %v, %v", m, err)
	}
	fencetest.WantStale(t, s.HSet(ctx, "h", 2, "name", "ada"), "h", 2, 3)
	must(t, s.HSet(ctx, "h", 4, "name", "ada", "role", "admin"))
	if m, err := s.HGetAll(ctx, "h", 6); err != nil || fmt.Sprint(m) != "map[name:ada role:admin]" {
		t.Fatalf("HGetAll: %v, %v", m, err)
	}
	if m, err := s.HGetAll(ctx, "h", 5); err != nil || len(m) != 2 {
		t.Fatalf("HGetAll by reader 5 after reader 6: %v, %v", m, err)
	}
	fencetest.WantStale(t, s.HSet(ctx, "h", 5, "role", "root"), "h", 5, 6)
	if err := s.HSet(ctx, "h", 9, "role"); !errors.Is(err, fenceredis.ErrOddArguments) {
		t.Errorf("HSet with a field and no value: %v", err)
	}
	// A delete keeps the tokens: a stale writer cannot bring the key back,
	// and a stale reader is refused.
	must(t, s.Del(ctx, "h", 7))
	fencetest.WantStale(t, s.HSet(ctx, "h", 6, "role", "late"), "h", 6, 7)
	_, err := s.HGetAll(ctx, "h", 6)
	fencetest.WantStale(t, err, "h", 6, 7)
	if n := c.Exists(ctx, "h").Val(); n != 0 {
		t.Error("h exists after a fenced DEL and a stale HSET")
	}
	must(t, s.Set(ctx, "k", 8, "v", 10*time.Second))
	if ttl := c.PTTL(ctx, "k").Val(); ttl <= 0 || ttl > 10*time.Second {
		t.Errorf("PTTL %v, want at most 10s", ttl)
	}
}

// TestRWStoreFailedOperationChangesNothing: an operation that Redis
// refuses (wrong type) records no token, and a key fenced with Store
// cannot be read or written with RWStore, nor the other way round.
func TestRWStoreFailedOperationChangesNothing(t *testing.T) {
	ctx := context.Background()
	c := client(t, redistest.Start(t))
	s := fenceredis.NewRW(c)
	must(t, s.Set(ctx, "k", 2, "a string", 0))
	wrongType := regexp.MustCompile("WRONGTYPE")
	if err := s.HSet(ctx, "k", 7, "f", "v"); err == nil || !wrongType.MatchString(err.Error()) {
		t.Fatalf("HSET on a string: %v, want WRONGTYPE", err)
	}
	if _, err := s.HGetAll(ctx, "k", 8); err == nil || !wrongType.MatchString(err.Error()) {
		t.Fatalf("HGETALL of a string: %v, want WRONGTYPE", err)
	}
	if w, h, _, _ := s.Tokens(ctx, "k"); w != 2 || h != 2 {
		t.Errorf("W, H = %d, %d after failed operations with 7 and 8, want 2, 2", w, h)
	}
	must(t, s.Set(ctx, "k", 3, "still mine", 0))

	plain := fenceredis.New(c)
	must(t, plain.Set(ctx, "p", 5, "plain", 0))
	if _, err := s.Get(ctx, "p", 6); err == nil || !wrongType.MatchString(err.Error()) {
		t.Errorf("RWStore read of a key fenced by Store: %v, want WRONGTYPE", err)
	}
	if err := plain.Set(ctx, "k", 9, "x", 0); err == nil || !wrongType.MatchString(err.Error()) {
		t.Errorf("Store write of a key fenced by RWStore: %v, want WRONGTYPE", err)
	}
	if v := c.Get(ctx, "k").Val(); v != "still mine" {
		t.Errorf("k = %q, want %q", v, "still mine")
	}
}

func TestRWStoreWithTokenKey(t *testing.T) {
	ctx := context.Background()
	c := client(t, redistest.Start(t))
	s := fenceredis.NewRW(c, fenceredis.WithTokenKey(func(key string) string { return "tokens:" + key }))
	must(t, s.Set(ctx, "k", 12, "v", 0))
	if _, err := s.Get(ctx, "k", 14); err != nil {
		t.Fatal(err)
	}
	if m := c.HGetAll(ctx, "tokens:k").Val(); fmt.Sprint(m) != "map[h:14 w:12]" {
		t.Errorf("tokens:k = %v, want w 12, h 14", m)
	}
	if n := c.Exists(ctx, "fence:{k}").Val(); n != 0 {
		t.Error("the default token key was written too")
	}
}

// TestRWStoreConcurrent runs a read-write lock's history at once: tokens
// 1..n are granted in order, about a third of them to writers (never two in
// a row, and the newest), and every holder reads (a writer also writes)
// many times, each starting a little after the one before. MONITOR shows, in order, each
// script with its token and operation followed by the commands it ran:
// what landed must keep the order of the tokens (a write at or above every
// earlier operation's token, a read at or above every earlier write's), a
// read must see no newer write, and every refusal must have had a reason
// (an operation with a higher token landed; for a reader, a write).
func TestRWStoreConcurrent(t *testing.T) {
	const holders, ops = 16, 30
	ctx := context.Background()
	srv := redistest.Start(t)
	mon := startMonitor(t, srv)
	s := fenceredis.NewRW(client(t, srv))
	// About a third of the tokens are writers, never two in a row, and the
	// newest, whose writes are never refused.
	writers := map[uint64]bool{holders: true}
	for tok := uint64(2); tok < holders-1; tok++ {
		if !writers[tok-1] && rand.IntN(3) == 0 {
			writers[tok] = true
		}
	}
	var mu sync.Mutex
	refused := map[uint64]int{}
	var wg sync.WaitGroup
	for h := 1; h <= holders; h++ {
		token := uint64(h)
		wg.Go(func() {
			time.Sleep(time.Duration(h-1) * 2 * time.Millisecond)
			for i := range ops {
				if rand.IntN(3) == 0 {
					time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
				}
				var err error
				if writers[token] && i%2 == 0 {
					err = s.Set(ctx, "doc", token, fmt.Sprint(token), 0)
				} else {
					var v string
					v, err = s.Get(ctx, "doc", token)
					if errors.Is(err, redis.Nil) {
						err = nil
					} else if err == nil {
						if n, _ := strconv.ParseUint(v, 10, 64); n > token {
							err = fmt.Errorf("read %d saw the write of %d", token, n)
						}
					}
				}
				var stale *fence.StaleTokenError
				switch {
				case err == nil:
				case errors.As(err, &stale) && stale.Token == token && stale.Highest > token:
					mu.Lock()
					refused[token]++
					mu.Unlock()
				default:
					t.Errorf("holder %d, operation %d: %v", token, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	client(t, srv).Echo(ctx, "end of test operations")

	script := regexp.MustCompile(`"2" "doc" "fence:\{doc\}" "(\d+)" "(get|set)"`)
	landedRead := regexp.MustCompile(`\[\d+ lua\] "GET" "doc"`)
	landedWrite := regexp.MustCompile(`\[\d+ lua\] "SET" "doc" "(\d+)"`)
	var token, maxW, maxAll uint64
	lastValue := uint64(0)
	reads, writes := 0, 0
	for _, line := range mon.until(t, "end of test operations") {
		if m := script.FindStringSubmatch(line); m != nil {
			token, _ = strconv.ParseUint(m[1], 10, 64)
			continue
		}
		if landedRead.MatchString(line) {
			if token < maxW {
				t.Fatalf("read %d landed after write %d", token, maxW)
			}
			reads++
		} else if m := landedWrite.FindStringSubmatch(line); m != nil {
			if m[1] != fmt.Sprint(token) {
				t.Fatalf("MONITOR shows SET %s inside the script of token %d: scripts are not shown before their commands", m[1], token)
			}
			if token < maxAll {
				t.Fatalf("write %d landed after an operation with token %d", token, maxAll)
			}
			maxW, lastValue = token, token
			writes++
		} else {
			continue
		}
		maxAll = max(maxAll, token)
	}
	total := reads + writes
	for tok, n := range refused {
		if tok >= maxAll || (!writers[tok] && tok >= maxW) {
			t.Errorf("holder %d (writer %v) was refused %d times, but the highest token landed is %d, the highest write %d", tok, writers[tok], n, maxAll, maxW)
		}
		total += n
	}
	if total != holders*ops {
		t.Errorf("%d operations landed or were refused, want %d", total, holders*ops)
	}
	if writes == 0 {
		t.Errorf("%d reads and %d writes landed", reads, writes)
	}
	if got := client(t, srv).Get(ctx, "doc").Val(); got != fmt.Sprint(lastValue) {
		t.Errorf("doc = %q, want the last landed write %d", got, lastValue)
	}
	t.Logf("writers %s, %d reads and %d writes landed", strings.Trim(fmt.Sprint(slices.Sorted(maps.Keys(writers))), "[]"), reads, writes)
}
