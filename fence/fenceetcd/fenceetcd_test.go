package fenceetcd_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/fencerlock/fencer/fence/fenceetcd"
	"github.com/fencerlock/fencer/internal/fencetest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newStore returns a Store on the test's own namespace, and that namespace.
func newStore(t *testing.T, opts ...fenceetcd.Option) (*fenceetcd.Store, clientv3.KV) {
	t.Helper()
	c := kv(t)
	s, err := fenceetcd.New(c, opts...)
	must(t, err)
	return s, c
}

// get returns key's value, and false if key does not exist.
func get(t *testing.T, c clientv3.KV, key string) (string, bool) {
	t.Helper()
	resp, err := c.Get(context.Background(), key)
	must(t, err)
	if len(resp.Kvs) == 0 {
		return "", false
	}
	return string(resp.Kvs[0].Value), true
}

func wantValue(t *testing.T, c clientv3.KV, key, want string) {
	t.Helper()
	if got, ok := get(t, c, key); !ok || got != want {
		t.Fatalf("%s = %q (exists: %v), want %q", key, got, ok, want)
	}
}

func wantHighest(t *testing.T, s *fenceetcd.Store, resource string, want uint64) {
	t.Helper()
	h, ok, err := s.Highest(context.Background(), resource)
	if err != nil || !ok || h != want {
		t.Fatalf("Highest(%q) = %d, %v, %v; want %d", resource, h, ok, err, want)
	}
}

func TestPutAndDelete(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)

	if _, ok, err := s.Highest(ctx, "doc"); ok || err != nil {
		t.Fatalf("Highest of a new key: %v, %v", ok, err)
	}
	// The first write: no token key yet.
	must(t, s.Put(ctx, "doc", 5, "five"))
	wantValue(t, c, "doc", "five")
	wantValue(t, c, "fence/token/doc", "00000000000000000005")
	// Equal is admitted: one holder writes many times.
	must(t, s.Put(ctx, "doc", 5, "five again"))
	wantValue(t, c, "doc", "five again")
	// Lower is refused, and changes nothing.
	fencetest.WantStale(t, s.Put(ctx, "doc", 4, "four"), "doc", 4, 5)
	wantValue(t, c, "doc", "five again")
	wantHighest(t, s, "doc", 5)
	must(t, s.Put(ctx, "doc", 8, "eight"))
	wantValue(t, c, "doc", "eight")
	wantHighest(t, s, "doc", 8)

	// A stale delete is refused.
	fencetest.WantStale(t, s.Delete(ctx, "doc", 7), "doc", 7, 8)
	wantValue(t, c, "doc", "eight")
	// A delete keeps the token: the stale writer cannot bring the key back.
	must(t, s.Delete(ctx, "doc", 9))
	if v, ok := get(t, c, "doc"); ok {
		t.Fatalf("doc = %q after a fenced delete", v)
	}
	wantHighest(t, s, "doc", 9)
	fencetest.WantStale(t, s.Put(ctx, "doc", 8, "eight, late"), "doc", 8, 9)
	if v, ok := get(t, c, "doc"); ok {
		t.Fatalf("doc = %q: a stale put recreated it", v)
	}
	must(t, s.Put(ctx, "doc", 9, "nine"))
	wantValue(t, c, "doc", "nine")

	// A delete of a key never written records its token too.
	must(t, s.Delete(ctx, "never", 3))
	wantHighest(t, s, "never", 3)
	fencetest.WantStale(t, s.Put(ctx, "never", 2, "x"), "never", 2, 3)
}

// TestDigitBoundaries: etcd compares values as bytes, so a token with more
// digits must still compare higher ("10" < "9" as bytes). Each pair is
// tried both ways on a fresh resource: lower then higher is admitted,
// higher then lower is refused.
func TestDigitBoundaries(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	pairs := []struct{ lower, higher uint64 }{
		{0, 1},
		{9, 10},
		{99, 100},
		{999999999, 1000000000},
		{1<<53 - 1, 1 << 53},
		{9999999999999999999, 10000000000000000000}, // 19 digits to 20
		{math.MaxUint64 - 1, math.MaxUint64},
		{2, math.MaxUint64},
	}
	for _, p := range pairs {
		up := fmt.Sprintf("up-%d-%d", p.lower, p.higher)
		must(t, s.Put(ctx, up, p.lower, "lower"))
		must(t, s.Put(ctx, up, p.higher, "higher"))
		wantValue(t, c, up, "higher")
		fencetest.WantStale(t, s.Put(ctx, up, p.lower, "lower, late"), up, p.lower, p.higher)
		wantValue(t, c, up, "higher")
		wantHighest(t, s, up, p.higher)

		down := fmt.Sprintf("down-%d-%d", p.lower, p.higher)
		must(t, s.Put(ctx, down, p.higher, "higher"))
		fencetest.WantStale(t, s.Put(ctx, down, p.lower, "lower"), down, p.lower, p.higher)
		wantValue(t, c, down, "higher")
		if v, _ := get(t, c, "fence/token/"+down); len(v) != 20 {
			t.Errorf("token of %s stored as %q, want 20 digits", down, v)
		}
	}
	wantValue(t, c, fmt.Sprintf("fence/token/up-%d-%d", uint64(math.MaxUint64-1), uint64(math.MaxUint64)), "18446744073709551615")
}

// TestTxn: the caller's ops run in the transaction that admits the token,
// all or none.
func TestTxn(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	resp, err := s.Txn(ctx, "account/42", 7,
		clientv3.OpPut("ledger/42/1", "+10"),
		clientv3.OpPut("balance/42", "10"),
		clientv3.OpGet("balance/42"),
	)
	must(t, err)
	if n := len(resp.Responses); n != 4 {
		t.Fatalf("%d responses, want 3 for the ops and 1 for the token", n)
	}
	if kvs := resp.Responses[2].GetResponseRange().GetKvs(); len(kvs) != 1 || string(kvs[0].Value) != "10" {
		t.Fatalf("the Get in the transaction read %v, want balance 10", kvs)
	}
	wantHighest(t, s, "account/42", 7)
	if _, ok := get(t, c, "fence/token/ledger/42/1"); ok {
		t.Error("a token was recorded under a key written, not under the resource")
	}

	// A stale transaction runs none of its ops.
	_, err = s.Txn(ctx, "account/42", 6,
		clientv3.OpPut("ledger/42/2", "+1000"),
		clientv3.OpPut("balance/42", "1010"),
	)
	fencetest.WantStale(t, err, "account/42", 6, 7)
	wantValue(t, c, "balance/42", "10")
	if _, ok := get(t, c, "ledger/42/2"); ok {
		t.Error("a refused transaction wrote ledger/42/2")
	}

	// A nested transaction, with a condition of the caller's own, runs
	// inside the admitted one.
	resp, err = s.Txn(ctx, "account/42", 8, clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.Value("balance/42"), "=", "10")},
		[]clientv3.Op{clientv3.OpPut("balance/42", "15"), clientv3.OpPut("ledger/42/2", "+5")},
		nil,
	))
	must(t, err)
	if !resp.Responses[0].GetResponseTxn().GetSucceeded() {
		t.Fatal("the nested transaction's condition failed")
	}
	wantValue(t, c, "balance/42", "15")
	wantHighest(t, s, "account/42", 8)

	// An error from etcd (one key put twice) changes nothing either.
	_, err = s.Txn(ctx, "account/42", 9, clientv3.OpPut("balance/42", "1"), clientv3.OpPut("balance/42", "2"))
	if err == nil {
		t.Fatal("a transaction that puts one key twice was accepted")
	}
	wantHighest(t, s, "account/42", 8)
}

func TestTokenPrefix(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t, fenceetcd.WithTokenPrefix("/tokens/"))
	must(t, s.Put(ctx, "/app/doc", 12, "v"))
	wantValue(t, c, "/tokens//app/doc", "00000000000000000012")
	if s.TokenKey("/app/doc") != "/tokens//app/doc" {
		t.Errorf("TokenKey = %q", s.TokenKey("/app/doc"))
	}
	if _, ok := get(t, c, "fence/token//app/doc"); ok {
		t.Error("the default token key was written too")
	}
}

func TestBadDefinition(t *testing.T) {
	ctx := context.Background()
	if _, err := fenceetcd.New(nil); !errors.Is(err, fenceetcd.ErrDefinition) {
		t.Errorf("New(nil): %v", err)
	}
	var none *clientv3.Client
	if _, err := fenceetcd.New(none); !errors.Is(err, fenceetcd.ErrDefinition) {
		t.Errorf("New of a nil *clientv3.Client: %v", err)
	}
	if _, err := fenceetcd.New(kv(t), fenceetcd.WithTokenPrefix("")); !errors.Is(err, fenceetcd.ErrDefinition) {
		t.Errorf("an empty token prefix: %v", err)
	}
	s, c := newStore(t)
	must(t, s.Put(ctx, "doc", 3, "three"))
	must(t, s.Put(ctx, "fence/tokens-are-not-here", 3, "x")) // beside the prefix, not in it
	bad := map[string]func() error{
		"empty key":      func() error { return s.Put(ctx, "", 4, "x") },
		"empty resource": func() error { _, err := s.Txn(ctx, "", 4, clientv3.OpPut("a", "x")); return err },
		"put a token":    func() error { return s.Put(ctx, "fence/token/doc", 4, "00000000000000000000") },
		"delete a token": func() error { return s.Delete(ctx, "fence/token/doc", 4) },
		"delete all tokens": func() error {
			_, err := s.Txn(ctx, "doc", 4, clientv3.OpDelete("fence/", clientv3.WithPrefix()))
			return err
		},
		"delete a range over the tokens": func() error {
			_, err := s.Txn(ctx, "doc", 4, clientv3.OpDelete("a", clientv3.WithRange("z")))
			return err
		},
		"delete everything": func() error {
			_, err := s.Txn(ctx, "doc", 4, clientv3.OpDelete("", clientv3.WithPrefix()))
			return err
		},
		"delete from a key on": func() error {
			_, err := s.Txn(ctx, "doc", 4, clientv3.OpDelete("b", clientv3.WithFromKey()))
			return err
		},
		"a nested put of a token": func() error {
			_, err := s.Txn(ctx, "doc", 4, clientv3.OpTxn(nil, nil, []clientv3.Op{clientv3.OpPut("fence/token/other", "x")}))
			return err
		},
	}
	for name, f := range bad {
		if err := f(); !errors.Is(err, fenceetcd.ErrDefinition) {
			t.Errorf("%s: %v, want ErrDefinition", name, err)
		}
	}
	wantHighest(t, s, "doc", 3)
	wantValue(t, c, "doc", "three")
	// Ranges beside the prefix, and reads of it, are fine.
	_, err := s.Txn(ctx, "doc", 4,
		clientv3.OpDelete("fence/tokens-are-not-here", clientv3.WithPrefix()),
		clientv3.OpDelete("a", clientv3.WithRange("fence/token/")),
		clientv3.OpDelete("fence/token0", clientv3.WithFromKey()),
		clientv3.OpGet("fence/token/", clientv3.WithPrefix()),
	)
	must(t, err)

	// A token key that something else wrote is reported, not parsed.
	_, err = c.Put(ctx, "fence/token/doc", "99")
	must(t, err)
	if err := s.Put(ctx, "doc", 4, "x"); !errors.Is(err, fenceetcd.ErrTokenValue) {
		t.Errorf("a put against a token key holding 99: %v, want ErrTokenValue", err)
	}
	if _, _, err := s.Highest(ctx, "doc"); !errors.Is(err, fenceetcd.ErrTokenValue) {
		t.Errorf("Highest of a token key holding 99: %v, want ErrTokenValue", err)
	}
}

// TestLeasedValue: a value put with an etcd lease goes with the lease; its
// token stays, so the stale writer cannot put it back.
func TestLeasedValue(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	lease, err := cli.Grant(ctx, 60)
	must(t, err)
	must(t, s.Put(ctx, "session", 5, "five", clientv3.WithLease(lease.ID)))
	wantValue(t, c, "session", "five")
	_, err = cli.Revoke(ctx, lease.ID)
	must(t, err)
	if v, ok := get(t, c, "session"); ok {
		t.Fatalf("session = %q after its lease was revoked", v)
	}
	wantHighest(t, s, "session", 5)
	fencetest.WantStale(t, s.Put(ctx, "session", 4, "four"), "session", 4, 5)
	if _, ok := get(t, c, "session"); ok {
		t.Fatal("a stale put recreated session")
	}
}

// TestTxnWithoutOps: a transaction with no ops records the token alone,
// which fences off lower tokens before the new holder writes anything.
func TestTxnWithoutOps(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	must(t, s.Put(ctx, "doc", 3, "three"))
	resp, err := s.Txn(ctx, "doc", 4)
	must(t, err)
	if len(resp.Responses) != 1 {
		t.Errorf("%d responses, want 1 for the token", len(resp.Responses))
	}
	wantHighest(t, s, "doc", 4)
	fencetest.WantStale(t, s.Put(ctx, "doc", 3, "three, late"), "doc", 3, 4)
	wantValue(t, c, "doc", "three")
}
