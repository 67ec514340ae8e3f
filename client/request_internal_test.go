package client

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Each kind of lock is sent as its command of docs/protocol.md.
func TestRequestArgs(t *testing.T) {
	ttl := 8 * time.Second
	set := []string{"a", "b"}
	for _, tc := range []struct {
		q                      lockReq
		acquire, extend, relse string
	}{
		{lockReq{kind: plainLock, name: "k", owner: "o", ttl: ttl},
			"[FENCE.ACQUIRE k o 8000 WAIT 500]", "[FENCE.EXTEND k o 8000]", "[FENCE.RELEASE k o]"},
		{lockReq{kind: readLock, name: "k", owner: "o", ttl: ttl},
			"[FENCE.RLOCK k o 8000 WAIT 500]", "[FENCE.EXTEND k o 8000]", "[FENCE.RELEASE k o]"},
		{lockReq{kind: writeLock, name: "k", owner: "o", ttl: ttl, session: 9},
			"[FENCE.WLOCK k o 0 WAIT 500 SESSION 9]", "[FENCE.EXTEND k o 8000]", "[FENCE.RELEASE k o SESSION 9]"},
		{lockReq{kind: permit, name: "k", owner: "o", ttl: ttl, permits: 3},
			"[FENCE.SEMACQUIRE k o 8000 3 WAIT 500]", "[FENCE.EXTEND k o 8000]", "[FENCE.RELEASE k o]"},
		{lockReq{kind: multiLock, name: "a", names: set, owner: "o", ttl: ttl},
			"[FENCE.MACQUIRE o 8000 2 a b WAIT 500]", "[FENCE.MEXTEND o 8000 2 a b]", "[FENCE.MRELEASE o 2 a b]"},
		{lockReq{kind: multiLock, name: "a", names: set, owner: "o", ttl: ttl, session: 9},
			"[FENCE.MACQUIRE o 0 2 a b WAIT 500 SESSION 9]", "[FENCE.MEXTEND o 8000 2 a b]", "[FENCE.MRELEASE o 2 a b SESSION 9]"},
	} {
		if got := fmt.Sprint(tc.q.acquireArgs(500 * time.Millisecond)); got != tc.acquire {
			t.Errorf("acquire %s, want %s", got, tc.acquire)
		}
		if got := fmt.Sprint(tc.q.extendArgs()); got != tc.extend {
			t.Errorf("extend %s, want %s", got, tc.extend)
		}
		if got := fmt.Sprint(tc.q.releaseArgs()); got != tc.relse {
			t.Errorf("release %s, want %s", got, tc.relse)
		}
	}
}

func TestParsePermitGrant(t *testing.T) {
	sent := time.Now()
	q := lockReq{kind: permit, name: "k", owner: "o", ttl: 8 * time.Second, permits: 3}
	g, ok, err := parseGrant([]any{int64(2), int64(42), int64(8000)}, q, sent)
	if err != nil || !ok || g.slot != 2 || g.token != 42 || g.ttl != 8*time.Second {
		t.Fatalf("parseGrant = %+v, %v, %v", g, ok, err)
	}
	for _, bad := range []any{
		[]any{int64(42), int64(8000)},           // no slot
		[]any{int64(3), int64(42), int64(8000)}, // slot out of range
		[]any{int64(-1), int64(42), int64(8000)},
		[]any{"0", int64(42), int64(8000)},
	} {
		if _, _, err := parseGrant(bad, q, sent); err == nil {
			t.Errorf("parseGrant(%v) accepted", bad)
		}
	}
}

func TestMultiReq(t *testing.T) {
	q, err := multiReq([]string{"b", "a", "b"})
	if err != nil || fmt.Sprint(q.names) != "[b a]" || q.name != "b" || q.keys() != 2 {
		t.Fatalf("multiReq = %+v, %v", q, err)
	}
	many := make([]string, maxKeys+1)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	for _, names := range [][]string{nil, many} {
		if _, err := multiReq(names); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("multiReq of %d names: %v", len(names), err)
		}
	}
	if err := (lockReq{kind: multiLock, name: "a", names: []string{"a", ""}, ttl: time.Second}).check(0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("an empty name in a set: %v", err)
	}
	if err := (lockReq{kind: permit, name: "a", ttl: time.Second}).check(0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("zero permits: %v", err)
	}
}
