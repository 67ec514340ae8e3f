package fenceredis_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence/fenceredis"
	"github.com/fencerlock/fencer/internal/fencetest"
	"github.com/fencerlock/fencer/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// rwCases are fencetest's scripted histories, with tokens beyond 2^53 and
// up to the largest (Lua numbers are doubles: the script compares strings).
var rwCases = append(fencetest.RWCases(), fencetest.RWCase{
	Name: "tokens beyond 2^53",
	Steps: []fencetest.RWStep{
		fencetest.Write(9, 0), fencetest.Read(10, 0), fencetest.Write(9, 10), // across a change of length
		fencetest.Write(1<<53+1, 0), fencetest.Read(1<<53, 1<<53+1), fencetest.Read(1<<64-1, 0),
		fencetest.Write(1<<64-2, 1<<64-1), fencetest.Write(1<<64-1, 0),
	},
	WantW: 1<<64 - 1, WantH: 1<<64 - 1,
})

// TestRWStoreCases runs the scripted histories with GET and SET, each
// write setting the value to its token: every admitted read must see the
// last admitted write.
func TestRWStoreCases(t *testing.T) {
	ctx := context.Background()
	c := client(t, redistest.Start(t))
	s := fenceredis.NewRW(c)
	for i, tc := range rwCases {
		t.Run(tc.Name, func(t *testing.T) {
			key := fmt.Sprintf("doc%d", i)
			if _, _, ok, err := s.Tokens(ctx, key); ok || err != nil {
				t.Fatalf("Tokens of a new key: %v, %v", ok, err)
			}
			last := ""
			for j, st := range tc.Steps {
				var err error
				var got string
				if st.Write {
					err = s.Set(ctx, key, st.Token, fmt.Sprint(st.Token), 0)
				} else {
					got, err = s.Get(ctx, key, st.Token)
					if errors.Is(err, redis.Nil) && last == "" {
						err = nil
					}
				}
				if st.StaleOver != 0 {
					fencetest.WantStale(t, err, key, st.Token, st.StaleOver)
					continue
				}
				if err != nil {
					t.Fatalf("step %d (write %v, token %d): %v", j, st.Write, st.Token, err)
				}
				if st.Write {
					last = fmt.Sprint(st.Token)
				} else if got != last {
					t.Fatalf("step %d: read %d got %q, want %q", j, st.Token, got, last)
				}
			}
			if v := c.Get(ctx, key).Val(); v != last {
				t.Errorf("%s holds %q, want %q", key, v, last)
			}
			w, h, ok, err := s.Tokens(ctx, key)
			if w != tc.WantW || h != tc.WantH || !ok || err != nil {
				t.Errorf("Tokens = %d, %d, %v, %v; want W %d, H %d", w, h, ok, err, tc.WantW, tc.WantH)
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
	writers := fencetest.RWWriters(holders)
	refused := fencetest.RWHolders(t, holders, ops, writers, func(write bool, token uint64) error {
		if write {
			return s.Set(ctx, "doc", token, fmt.Sprint(token), 0)
		}
		v, err := s.Get(ctx, "doc", token)
		if errors.Is(err, redis.Nil) {
			return nil
		}
		if n, _ := strconv.ParseUint(v, 10, 64); err == nil && n > token {
			return fmt.Errorf("read %d saw the write of %d", token, n)
		}
		return err
	})
	client(t, srv).Echo(ctx, "end of test operations")

	script := regexp.MustCompile(`"2" "doc" "fence:\{doc\}" "(\d+)" "(get|set)"`)
	landedRead := regexp.MustCompile(`\[\d+ lua\] "GET" "doc"`)
	landedWrite := regexp.MustCompile(`\[\d+ lua\] "SET" "doc" "(\d+)"`)
	var token, lastValue uint64
	var landed []fencetest.RWStep
	for _, line := range mon.until(t, "end of test operations") {
		if m := script.FindStringSubmatch(line); m != nil {
			token, _ = strconv.ParseUint(m[1], 10, 64)
			continue
		}
		if landedRead.MatchString(line) {
			landed = append(landed, fencetest.RWStep{Token: token})
		} else if m := landedWrite.FindStringSubmatch(line); m != nil {
			if m[1] != fmt.Sprint(token) {
				t.Fatalf("MONITOR shows SET %s inside the script of token %d: scripts are not shown before their commands", m[1], token)
			}
			landed = append(landed, fencetest.RWStep{Write: true, Token: token})
			lastValue = token
		}
	}
	fencetest.CheckRWHistory(t, landed, refused, holders, ops, writers)
	if got := client(t, srv).Get(ctx, "doc").Val(); got != fmt.Sprint(lastValue) {
		t.Errorf("doc = %q, want the last landed write %d", got, lastValue)
	}
}
