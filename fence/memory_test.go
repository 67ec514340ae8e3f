package fence_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence"
	"github.com/fencerlock/fencer/internal/fencetest"
)

func TestMemoryAdmit(t *testing.T) {
	ctx := context.Background()
	m := fence.NewMemory()
	var landed []uint64
	write := func(token uint64) error {
		return m.Admit(ctx, "r", token, func(context.Context) error {
			landed = append(landed, token)
			return nil
		})
	}
	if _, ok := m.Highest("r"); ok {
		t.Fatal("Highest reported a token before any write")
	}
	for _, step := range []struct {
		token     uint64
		wantStale bool
	}{
		{3, false}, {3, false}, {5, false}, {4, true}, {3, true}, {5, false}, {8, false}, {7, true},
	} {
		err := write(step.token)
		if step.wantStale != errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("write with token %d: err %v, want stale %v", step.token, err, step.wantStale)
		}
	}
	if want := []uint64{3, 3, 5, 5, 8}; fmt.Sprint(landed) != fmt.Sprint(want) {
		t.Errorf("writes that landed: %v, want %v", landed, want)
	}
	if h, ok := m.Highest("r"); !ok || h != 8 {
		t.Errorf("Highest = %d, %v; want 8, true", h, ok)
	}
	if _, ok := m.Highest("other"); ok {
		t.Error("a resource never written reports a token")
	}
}

func TestMemoryFailedWriteRecordsNothing(t *testing.T) {
	ctx := context.Background()
	m := fence.NewMemory()
	if err := m.Admit(ctx, "r", 4, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	if err := m.Admit(ctx, "r", 9, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Admit returned %v, want the write's error", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = m.Admit(ctx, "r", 10, func(context.Context) error { panic("write panicked") })
	}()
	if h, _ := m.Highest("r"); h != 4 {
		t.Fatalf("after failed writes Highest = %d, want 4", h)
	}
	// The panicking write released the resource: a write with token 5 is
	// admitted (and would wait forever if it had not).
	done := make(chan error, 1)
	go func() { done <- m.Admit(ctx, "r", 5, func(context.Context) error { return nil }) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("token 5 after failed writes with 9 and 10: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Admit blocked: a panicking write kept the resource")
	}
}

func TestMemoryWaitingAdmitHonoursContext(t *testing.T) {
	m := fence.NewMemory()
	inside, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = m.Admit(context.Background(), "r", 1, func(context.Context) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ran := false
	err := m.Admit(ctx, "r", 2, func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Fatalf("Admit while another write runs: err %v, ran %v; want DeadlineExceeded, not run", err, ran)
	}
	// Another resource is not held up.
	if err := m.Admit(context.Background(), "s", 1, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestMemoryConcurrentInterleavedTokens has holders with tokens 1..n write
// concurrently, many times each, to one resource: the writes that land must
// be in token order, and the newest holder must never be refused.
func TestMemoryConcurrentInterleavedTokens(t *testing.T) {
	const holders, writes = 12, 40
	m := fence.NewMemory()
	var landed []uint64 // appended only inside Admit, one write at a time
	refused := fencetest.Writers(t, holders, writes, func(token uint64, _ int) (bool, error) {
		return fencetest.Refusal(token, m.Admit(context.Background(), "r", token, func(context.Context) error {
			landed = append(landed, token)
			return nil
		}))
	})
	fencetest.CheckHistory(t, refused, holders, writes, landed)
	if h, _ := m.Highest("r"); h != holders {
		t.Errorf("Highest = %d, want %d", h, holders)
	}
}

func ExampleMemory() {
	ctx := context.Background()
	v := fence.NewMemory()
	balance := 0
	deposit := func(token uint64, amount int) error {
		return v.Admit(ctx, "account/42", token, func(context.Context) error {
			balance += amount
			return nil
		})
	}
	fmt.Println(deposit(33, 10)) // the holder of token 33
	fmt.Println(deposit(34, 5))  // the lease passed on: token 34
	fmt.Println(deposit(33, 10)) // the old holder wakes up
	fmt.Println(balance)
	// Output:
	// <nil>
	// <nil>
	// fence: stale token 33 for "account/42": token 34 was already admitted
	// 15
}
