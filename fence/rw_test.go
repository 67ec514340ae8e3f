package fence_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence"
	"github.com/fencerlock/fencer/internal/fencetest"
)

// rwStep is one operation of a scripted history: a read or a write with a
// token, and the token that refuses it (0 if it is admitted).
type rwStep struct {
	write     bool
	token     uint64
	staleOver uint64
}

func read(token, staleOver uint64) rwStep  { return rwStep{false, token, staleOver} }
func write(token, staleOver uint64) rwStep { return rwStep{true, token, staleOver} }

func (s rwStep) String() string {
	if s.write {
		return fmt.Sprintf("write %d", s.token)
	}
	return fmt.Sprintf("read %d", s.token)
}

// rwCases are the scripted histories; each ends with the resource's W and
// H. The RW adapters' tests run the same ones.
var rwCases = []struct {
	name        string
	steps       []rwStep
	wantW       uint64
	wantH       uint64
	wantUnknown bool // nothing admitted
}{
	{name: "fresh resource: a read", steps: []rwStep{read(4, 0)}, wantW: 0, wantH: 4},
	{name: "fresh resource: a write", steps: []rwStep{write(4, 0)}, wantW: 4, wantH: 4},
	{name: "token zero on a fresh resource", steps: []rwStep{read(0, 0), write(0, 0)}, wantW: 0, wantH: 0},
	{
		// Reader 5 paused while writer 9 wrote; reader 7 was granted
		// before writer 9 (which then waited for it) and reads before the
		// write and not after.
		name:  "paused reader",
		steps: []rwStep{read(5, 0), read(7, 0), write(9, 0), read(5, 9), read(7, 9), read(9, 0)},
		wantW: 9, wantH: 9,
	},
	{
		// Writer 5 paused; its lock passed to readers 8 and 9, then to
		// writer 12. Readers 8 and 9 read before writer 12 wrote.
		name: "paused writer",
		steps: []rwStep{
			write(5, 0), read(8, 0), read(9, 0), write(5, 9),
			write(12, 0), write(5, 12), read(8, 12), read(9, 12), read(12, 0),
		},
		wantW: 12, wantH: 12,
	},
	{
		name:  "readers hold together: the lower token reads after the higher",
		steps: []rwStep{read(8, 0), read(7, 0), read(8, 0), read(6, 0)},
		wantW: 0, wantH: 8,
	},
	{
		name:  "a write equal to W is a retry of the same grant",
		steps: []rwStep{write(9, 0), write(9, 0), write(9, 0)},
		wantW: 9, wantH: 9,
	},
	{
		name:  "a writer reads its own writes",
		steps: []rwStep{write(9, 0), read(9, 0), write(9, 0)},
		wantW: 9, wantH: 9,
	},
	{
		// A downgraded writer keeps its token as a reader; readers that
		// join it read, and its own writes are refused once they have.
		name:  "downgrade, readers join",
		steps: []rwStep{write(9, 0), read(9, 0), read(11, 0), write(9, 11), read(9, 0)},
		wantW: 9, wantH: 11,
	},
	{
		name:  "a write below a reader's token is refused, above it admitted",
		steps: []rwStep{read(20, 0), write(19, 20), write(21, 0), read(20, 21)},
		wantW: 21, wantH: 21,
	},
	{
		name:  "a refusal changes nothing",
		steps: []rwStep{write(10, 0), read(3, 10), write(4, 10), read(10, 0)},
		wantW: 10, wantH: 10,
	},
	{
		name:  "tokens beyond 2^53 and up to the largest",
		steps: []rwStep{write(1<<53+1, 0), read(1<<53, 1<<53+1), read(1<<64-1, 0), write(1<<64-2, 1<<64-1), write(1<<64-1, 0)},
		wantW: 1<<64 - 1, wantH: 1<<64 - 1,
	},
}

// runRWSteps runs steps through v on resource r, failing the test at the
// first outcome that is not the one wanted.
func runRWSteps(t *testing.T, v fence.RWValidator, r string, steps []rwStep) {
	t.Helper()
	ctx := context.Background()
	for i, st := range steps {
		ran := false
		op := func(context.Context) error { ran = true; return nil }
		var err error
		if st.write {
			err = v.AdmitWrite(ctx, r, st.token, op)
		} else {
			err = v.AdmitRead(ctx, r, st.token, op)
		}
		if st.staleOver == 0 {
			if err != nil || !ran {
				t.Fatalf("step %d, %v: err %v, ran %v; want admitted", i, st, err, ran)
			}
			continue
		}
		if ran {
			t.Fatalf("step %d, %v: ran although it should be refused", i, st)
		}
		fencetest.WantStale(t, err, r, st.token, st.staleOver)
	}
}

func TestRWMemoryCases(t *testing.T) {
	for _, tc := range rwCases {
		t.Run(tc.name, func(t *testing.T) {
			m := fence.NewRWMemory()
			runRWSteps(t, m, "r", tc.steps)
			w, h, ok := m.Tokens("r")
			if w != tc.wantW || h != tc.wantH || !ok {
				t.Errorf("Tokens = %d, %d, %v; want W %d, H %d, true", w, h, ok, tc.wantW, tc.wantH)
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
// checkRWHistory), and every refusal must have had a reason.
func TestRWMemoryConcurrent(t *testing.T) {
	const holders, ops = 24, 40
	m := fence.NewRWMemory()
	writers := rwWriters(holders)
	var mu sync.Mutex
	var landed []rwStep
	record := func(s rwStep) func(context.Context) error {
		return func(context.Context) error { mu.Lock(); landed = append(landed, s); mu.Unlock(); return nil }
	}
	refused := rwHolders(t, holders, ops, writers, func(write bool, token uint64) error {
		if write {
			return m.AdmitWrite(context.Background(), "r", token, record(rwStep{write: true, token: token}))
		}
		return m.AdmitRead(context.Background(), "r", token, record(rwStep{token: token}))
	})
	checkRWHistory(t, landed, refused, holders, ops, writers)
}

// rwWriters picks which of the tokens 1..holders are writers: about a third,
// never two in a row, so that readers hold together between them, and the
// newest, whose writes are never refused.
func rwWriters(holders int) map[uint64]bool {
	w := map[uint64]bool{uint64(holders): true}
	for tok := uint64(2); tok < uint64(holders)-1; tok++ {
		if !w[tok-1] && rand.IntN(3) == 0 {
			w[tok] = true
		}
	}
	return w
}

// rwHolders runs holders with tokens 1..holders, each doing ops operations
// through op concurrently (a writer alternates reads and writes, a reader
// only reads), holder h starting 2(h-1) ms after the first. It returns the
// operations refused, per token.
func rwHolders(t *testing.T, holders, ops int, writers map[uint64]bool, op func(write bool, token uint64) error) map[uint64]int {
	t.Helper()
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
				err := op(writers[token] && i%2 == 0, token)
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
	return refused
}

// checkRWHistory checks a landed history (the operations that landed, in
// the order they did; reads that ran together in any order): a write's
// token is at least every earlier operation's, a read's at least every
// earlier write's. Every refusal had a reason: an operation with a higher
// token landed, for a reader a write; so the newest holder was never
// refused. Every operation landed or was refused.
func checkRWHistory(t *testing.T, landed []rwStep, refused map[uint64]int, holders, ops int, writers map[uint64]bool) {
	t.Helper()
	var maxW, maxAll uint64
	reads, writes := 0, 0
	for i, s := range landed {
		if s.write {
			if s.token < maxAll {
				t.Fatalf("landed %d: write %d after an operation with token %d", i, s.token, maxAll)
			}
			maxW = s.token
			writes++
		} else {
			if s.token < maxW {
				t.Fatalf("landed %d: read %d after write %d", i, s.token, maxW)
			}
			reads++
		}
		maxAll = max(maxAll, s.token)
	}
	checkRefusals(t, refused, writers, maxW, maxAll)
	if total := len(landed) + sum(refused); total != holders*ops {
		t.Errorf("%d operations landed or were refused, want %d", total, holders*ops)
	}
	if writes == 0 {
		t.Error("no write landed")
	}
	t.Logf("writers %v: %d reads and %d writes landed, %d refused", slices.Sorted(maps.Keys(writers)), reads, writes, sum(refused))
}

// checkRefusals fails the test for a refusal without a reason: every
// refused token is below the highest that landed (maxAll), a reader's below
// the highest write that landed (maxW).
func checkRefusals(t *testing.T, refused map[uint64]int, writers map[uint64]bool, maxW, maxAll uint64) {
	t.Helper()
	for tok, n := range refused {
		if tok >= maxAll || (!writers[tok] && tok >= maxW) {
			t.Errorf("holder %d (writer %v) was refused %d times, but the highest token landed is %d, the highest write %d", tok, writers[tok], n, maxAll, maxW)
		}
	}
}

func sum(m map[uint64]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
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
