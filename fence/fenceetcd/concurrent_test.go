package fenceetcd_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence"
	"github.com/fencerlock/fencer/fence/fenceetcd"
	"github.com/fencerlock/fencer/internal/fencetest"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// landing is what one etcd revision of a test's namespace changed: the
// token recorded and the data keys written, by key (a delete as "").
type landing struct {
	rev    int64
	tokens map[string]uint64 // resource → token recorded at this revision
	data   map[string]string
}

// history returns every revision that changed the test's namespace from
// rev on, in order, up to a marker the test puts after its writes: etcd's
// own record of what landed. Keys are given without the namespace.
func history(t *testing.T, from int64) []landing {
	t.Helper()
	ns := ns(t)
	marker, err := cli.Put(context.Background(), ns+"end of test writes", "")
	must(t, err)
	end := marker.Header.Revision
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []landing
	for wr := range cli.Watch(ctx, ns, clientv3.WithPrefix(), clientv3.WithRev(from)) {
		must(t, wr.Err())
		for _, ev := range wr.Events {
			rev := ev.Kv.ModRevision
			if rev >= end {
				return out
			}
			if len(out) == 0 || out[len(out)-1].rev != rev {
				out = append(out, landing{rev: rev, tokens: map[string]uint64{}, data: map[string]string{}})
			}
			l := &out[len(out)-1]
			key := strings.TrimPrefix(string(ev.Kv.Key), ns)
			if res, ok := strings.CutPrefix(key, fenceetcd.DefaultTokenPrefix); ok {
				if ev.Type != mvccpb.PUT {
					t.Fatalf("revision %d deleted the token key of %s", rev, res)
				}
				tok, err := strconv.ParseUint(string(ev.Kv.Value), 10, 64)
				must(t, err)
				l.tokens[res] = tok
				continue
			}
			l.data[key] = string(ev.Kv.Value) // empty for a delete
		}
	}
	t.Fatalf("the watch ended before revision %d: %v", end, ctx.Err())
	return nil
}

// startRevision returns the revision after which a test's writes land.
func startRevision(t *testing.T) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), "any")
	must(t, err)
	return resp.Header.Revision + 1
}

// writerOf parses the token out of a value written as "token N ...".
func writerOf(t *testing.T, value string) uint64 {
	t.Helper()
	var tok uint64
	if _, err := fmt.Sscanf(value, "token %d", &tok); err != nil {
		t.Fatalf("value %q names no token: %v", value, err)
	}
	return tok
}

// checkLandings checks that every revision that wrote data also recorded
// the writer's token for the data's resource (resourceOf), in the same
// revision: the write and the recording are one transaction.
func checkLandings(t *testing.T, landings []landing, resourceOf func(key string) string) map[string][]uint64 {
	t.Helper()
	landed := map[string][]uint64{}
	for _, l := range landings {
		if len(l.tokens) != 1 {
			t.Fatalf("revision %d recorded %d tokens: %v", l.rev, len(l.tokens), l.tokens)
		}
		for key, v := range l.data {
			res := resourceOf(key)
			tok, ok := l.tokens[res]
			if !ok {
				t.Fatalf("revision %d wrote %s without recording a token for %s", l.rev, key, res)
			}
			if v != "" && writerOf(t, v) != tok {
				t.Fatalf("revision %d wrote %s = %q with token %d", l.rev, key, v, tok)
			}
		}
		for res, tok := range l.tokens {
			landed[res] = append(landed[res], tok)
		}
	}
	return landed
}

// TestConcurrentInterleavedTokens: holders with tokens 1..n put and delete
// one key, and run two-key transactions on another resource, at once;
// holder h starts 2(h-1) ms after the first. etcd's history shows what
// landed, in order: landed tokens must never go down, and the newest holder
// must never be refused.
func TestConcurrentInterleavedTokens(t *testing.T) {
	const holders, writes = 8, 30
	ctx := context.Background()
	s, c := newStore(t)
	from := startRevision(t)
	refused := fencetest.Writers(t, holders, writes, func(token uint64, i int) (bool, error) {
		value := fmt.Sprintf("token %d write %d", token, i)
		switch rand.IntN(3) {
		case 0:
			return fencetest.Refusal(token, s.Put(ctx, "doc", token, value))
		case 1:
			return fencetest.Refusal(token, s.Delete(ctx, "doc", token))
		default:
			_, err := s.Txn(ctx, "stream", token, clientv3.OpPut("stream/last", value), clientv3.OpPut("stream/by", value))
			return fencetest.Refusal(token, err)
		}
	})
	landed := checkLandings(t, history(t, from), func(key string) string {
		if strings.HasPrefix(key, "stream/") {
			return "stream"
		}
		return key
	})
	fencetest.CheckHistory(t, refused, holders, writes, landed["doc"], landed["stream"])
	if v, _ := get(t, c, "stream/by"); writerOf(t, v) != holders {
		t.Errorf("stream/by = %q, want the newest holder's write", v)
	}
	wantHighest(t, s, "doc", holders)
}

// TestConcurrentRandomTokens: writers with random tokens of every length,
// all at once, each a few times. What landed, replayed in etcd's order
// through fence.Memory (the reference), is all admitted there; every
// refusal names a token that landed; and the store ends with the highest
// token's value.
func TestConcurrentRandomTokens(t *testing.T) {
	const writers, writes = 16, 8
	ctx := context.Background()
	s, c := newStore(t)
	tokens := make([]uint64, writers)
	seen := map[uint64]bool{}
	for i := range tokens {
		for tokens[i] == 0 || seen[tokens[i]] {
			// Random lengths, so tokens of different digit counts meet.
			digits := 1 + rand.IntN(20)
			tokens[i] = rand.Uint64()
			if digits < 20 {
				tokens[i] %= pow10(digits)
			}
		}
		seen[tokens[i]] = true
	}
	top := tokens[0]
	for _, tok := range tokens {
		top = max(top, tok)
	}
	from := startRevision(t)
	var mu sync.Mutex
	refusedBy := map[uint64]uint64{} // refused token → the token that refused it
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, tok := range tokens {
		wg.Go(func() {
			<-start
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			for i := range writes {
				if rand.IntN(2) == 0 {
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				}
				err := s.Put(ctx, "doc", tok, fmt.Sprintf("token %d write %d", tok, i))
				var stale *fence.StaleTokenError
				switch {
				case errors.As(err, &stale):
					mu.Lock()
					refusedBy[tok] = stale.Highest
					mu.Unlock()
				case err != nil:
					t.Errorf("token %d: %v", tok, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()

	landed := checkLandings(t, history(t, from), func(key string) string { return key })["doc"]
	ref := fence.NewMemory()
	for i, tok := range landed {
		if err := ref.Admit(ctx, "doc", tok, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("landing %d of %d in etcd, token %d, is refused by fence.Memory: %v", i+1, len(landed), tok, err)
		}
	}
	wasLanded := map[uint64]bool{}
	for _, tok := range landed {
		wasLanded[tok] = true
	}
	for tok, by := range refusedBy {
		if by <= tok || !wasLanded[by] {
			t.Errorf("token %d was refused for %d, which is not a higher token that landed", tok, by)
		}
	}
	if _, ok := refusedBy[top]; ok {
		t.Errorf("the highest token %d was refused", top)
	}
	if h, _ := ref.Highest("doc"); h != top {
		t.Errorf("fence.Memory's highest after the replay is %d, want %d", h, top)
	}
	wantHighest(t, s, "doc", top)
	if v, _ := get(t, c, "doc"); writerOf(t, v) != top {
		t.Errorf("doc = %q, want a write of the highest token %d", v, top)
	}
	t.Logf("%d writers, %d writes landed, %d writers refused at least once", writers, len(landed), len(refusedBy))
}

func pow10(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}
