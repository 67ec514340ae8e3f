package fence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence"
	"github.com/fencerlock/fencer/internal/fencetest"
)

// rwCases are the scripted histories, with the largest tokens; the RW
// adapters' tests run the same ones.
var rwCases = append(fencetest.RWCases(), fencetest.RWCase{
	Name: "tokens beyond 2^53 and up to the largest",
	Steps: []fencetest.RWStep{fencetest.Write(1<<53+1, 0), fencetest.Read(1<<53, 1<<53+1), fencetest.Read(1<<64-1, 0),
		fencetest.Write(1<<64-2, 1<<64-1), fencetest.Write(1<<64-1, 0)},
	WantW: 1<<64 - 1, WantH: 1<<64 - 1,
})

// runRWSteps runs steps through v on resource r, failing the test at the
// first outcome that is not the one wanted.
func runRWSteps(t *testing.T, v fence.RWValidator, r string, steps []fencetest.RWStep) {
	t.Helper()
	ctx := context.Background()
	for i, st := range steps {
		ran := false
		op := func(context.Context) error { ran = true; return nil }
		var err error
		if st.Write {
			err = v.AdmitWrite(ctx, r, st.Token, op)
		} else {
			err = v.AdmitRead(ctx, r, st.Token, op)
		}
		if st.StaleOver == 0 {
			if err != nil || !ran {
				t.Fatalf("step %d, %v: err %v, ran %v; want admitted", i, st, err, ran)
			}
			continue
		}
		if ran {
			t.Fatalf("step %d, %v: ran although it should be refused", i, st)
		}
		fencetest.WantStale(t, err, r, st.Token, st.StaleOver)
	}
}

func TestRWMemoryCases(t *testing.T) {
	for _, tc := range rwCases {
		t.Run(tc.Name, func(t *testing.T) {
			m := fence.NewRWMemory()
			runRWSteps(t, m, "r", tc.Steps)
			w, h, ok := m.Tokens("r")
			if w != tc.WantW || h != tc.WantH || !ok {
				t.Errorf("Tokens = %d, %d, %v; want W %d, H %d, true", w, h, ok, tc.WantW, tc.WantH)
			}
			if _, _, ok := m.Tokens("other"); ok {
				t.Error("a resource never used reports tokens")
			}
		})
	}
}

// TestPlainRuleRefusesReadersHoldingTogether shows why readers need the
// read-write rule: with the plain rule, reader 7 is refused after reader 8
// has read, although both hold the read lock.
func TestPlainRuleRefusesReadersHoldingTogether(t *testing.T) {
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	plain := fence.NewMemory()
	if err := plain.Admit(ctx, "r", 8, noop); err != nil {
		t.Fatal(err)
	}
	fencetest.WantStale(t, plain.Admit(ctx, "r", 7, noop), "r", 7, 8)
	rw := fence.NewRWMemory()
	if err := rw.AdmitRead(ctx, "r", 8, noop); err != nil {
		t.Fatal(err)
	}
	if err := rw.AdmitRead(ctx, "r", 7, noop); err != nil {
		t.Fatalf("reader 7 after reader 8: %v", err)
	}
}

func TestRWMemoryFailedOperationRecordsNothing(t *testing.T) {
	ctx := context.Background()
	m := fence.NewRWMemory()
	boom := errors.New("disk full")
	if err := m.AdmitRead(ctx, "r", 6, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing read: %v, want the read's error", err)
	}
	if _, _, ok := m.Tokens("r"); ok {
		t.Fatal("a failed read was recorded")
	}
	if err := m.AdmitWrite(ctx, "r", 4, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("write 4 after a failed read 6: %v", err)
	}
	if err := m.AdmitWrite(ctx, "r", 9, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing write: %v, want the write's error", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = m.AdmitWrite(ctx, "r", 10, func(context.Context) error { panic("write panicked") })
	}()
	if w, h, _ := m.Tokens("r"); w != 4 || h != 4 {
		t.Fatalf("after failed writes W, H = %d, %d; want 4, 4", w, h)
	}
	// The panicking write let go of the resource.
	done := make(chan error, 1)
	go func() { done <- m.AdmitRead(ctx, "r", 5, func(context.Context) error { return nil }) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read 5 after failed writes: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AdmitRead blocked: a panicking write kept the resource")
	}
}

// TestRWMemoryReadersRunTogether: two reads with different tokens are
// inside at once (each waits for the other to start), and a write waits
// for both.
func TestRWMemoryReadersRunTogether(t *testing.T) {
	ctx := context.Background()
	m := fence.NewRWMemory()
	var started sync.WaitGroup
	started.Add(2)
	both := make(chan struct{})
	go func() { started.Wait(); close(both) }()
	errs := make(chan error, 2)
	for _, token := range []uint64{7, 8} {
		go func() {
			errs <- m.AdmitRead(ctx, "r", token, func(context.Context) error {
				started.Done()
				select {
				case <-both:
					return nil
				case <-time.After(10 * time.Second):
					return fmt.Errorf("reader %d: the other reader did not start within 10s", token)
				}
			})
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if w, h, _ := m.Tokens("r"); w != 0 || h != 8 {
		t.Errorf("W, H = %d, %d; want 0, 8", w, h)
	}
}

// TestRWMemoryWriteNotOvertaken: a write that waits for a read is not
// overtaken by reads that arrive after it, and a waiter whose context ends
// gives up without running.
func TestRWMemoryWriteNotOvertaken(t *testing.T) {
	ctx := context.Background()
	m := fence.NewRWMemory()
	inside, release := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- m.AdmitRead(ctx, "r", 3, func(context.Context) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside

	var mu sync.Mutex
	var order []string
	note := func(s string) func(context.Context) error {
		return func(context.Context) error { mu.Lock(); order = append(order, s); mu.Unlock(); return nil }
	}
	writeDone := make(chan error, 1)
	go func() { writeDone <- m.AdmitWrite(ctx, "r", 5, note("write 5")) }()
	waitQueued(t, m, "r", 1)
	readDone := make(chan error, 1)
	go func() { readDone <- m.AdmitRead(ctx, "r", 5, note("read 5")) }()
	waitQueued(t, m, "r", 2)

	// A read and a write that give up while waiting run nothing.
	for _, w := range []bool{false, true} {
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		ran := false
		op := func(context.Context) error { ran = true; return nil }
		var err error
		if w {
			err = m.AdmitWrite(short, "r", 6, op)
		} else {
			err = m.AdmitRead(short, "r", 6, op)
		}
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || ran {
			t.Fatalf("waiting (write %v) with a deadline: err %v, ran %v; want DeadlineExceeded, not run", w, err, ran)
		}
	}
	// Another resource is not held up.
	if err := m.AdmitWrite(ctx, "s", 1, note("other")); err != nil {
		t.Fatal(err)
	}

	close(release)
	for _, ch := range []chan error{firstDone, writeDone, readDone} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(order) != "[other write 5 read 5]" {
		t.Errorf("order %v, want the write before the read that came after it", order)
	}
}

// waitQueued waits until n operations wait for resource r's turn. A probe
// operation would change what it waits for, so it polls the count.
func waitQueued(t *testing.T, m *fence.RWMemory, r string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for fence.RWMemoryWaiting(m, r) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d operations on %s did not start waiting within 10s", n, r)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRWMemoryConcurrent runs a read-write lock's history at once: tokens
// 1..n are granted in order, a third of them to writers, and their holders
// all read (and the writers write) many times, each starting a little after
// the one before. What landed must keep the order of the tokens (see
// fencetest.CheckRWHistory), and every refusal must have had a reason.
func TestRWMemoryConcurrent(t *testing.T) {
	const holders, ops = 24, 40
	m := fence.NewRWMemory()
	writers := fencetest.RWWriters(holders)
	var mu sync.Mutex
	var landed []fencetest.RWStep
	record := func(s fencetest.RWStep) func(context.Context) error {
		return func(context.Context) error { mu.Lock(); landed = append(landed, s); mu.Unlock(); return nil }
	}
	refused := fencetest.RWHolders(t, holders, ops, writers, func(write bool, token uint64) error {
		if write {
			return m.AdmitWrite(context.Background(), "r", token, record(fencetest.RWStep{Write: true, Token: token}))
		}
		return m.AdmitRead(context.Background(), "r", token, record(fencetest.RWStep{Token: token}))
	})
	fencetest.CheckRWHistory(t, landed, refused, holders, ops, writers)
}

func ExampleRWMemory() {
	ctx := context.Background()
	v := fence.NewRWMemory()
	report := "draft"
	read := func(token uint64) {
		err := v.AdmitRead(ctx, "report", token, func(context.Context) error {
			fmt.Printf("reader %d reads %q\n", token, report)
			return nil
		})
		if err != nil {
			fmt.Println(err)
		}
	}
	read(8) // readers 7 and 8 hold the read lock together
	read(7)
	fmt.Println(v.AdmitWrite(ctx, "report", 5, func(context.Context) error { // a paused writer wakes up
		report = "overwritten"
		return nil
	}))
	fmt.Println(v.AdmitWrite(ctx, "report", 12, func(context.Context) error { // the next writer
		report = "final"
		return nil
	}))
	read(8) // reader 8 paused too
	read(13)
	// Output:
	// reader 8 reads "draft"
	// reader 7 reads "draft"
	// fence: stale token 5 for "report": token 8 was already admitted
	// <nil>
	// fence: stale token 8 for "report": token 12 was already admitted
	// reader 13 reads "final"
}
