package fencetest

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence"
)

// RWStep is one operation of a read-write history: a read or a write with a
// token, and in a scripted history the token that refuses it (0 if it is
// admitted).
type RWStep struct {
	Write     bool
	Token     uint64
	StaleOver uint64
}

// Read and Write make the steps of a scripted history.
func Read(token, staleOver uint64) RWStep  { return RWStep{false, token, staleOver} }
func Write(token, staleOver uint64) RWStep { return RWStep{true, token, staleOver} }

func (s RWStep) String() string {
	if s.Write {
		return fmt.Sprintf("write %d", s.Token)
	}
	return fmt.Sprintf("read %d", s.Token)
}

// RWCase is a scripted history and the W and H it leaves the resource with.
type RWCase struct {
	Name         string
	Steps        []RWStep
	WantW, WantH uint64
}

// RWCases returns the scripted histories every read-write validator runs
// (fence.RWMemory is the reference), with tokens below 2^53; each
// validator's tests add a case with the largest tokens it takes.
func RWCases() []RWCase {
	return []RWCase{
		{Name: "fresh resource: a read", Steps: []RWStep{Read(4, 0)}, WantW: 0, WantH: 4},
		{Name: "fresh resource: a write", Steps: []RWStep{Write(4, 0)}, WantW: 4, WantH: 4},
		{Name: "token zero on a fresh resource", Steps: []RWStep{Read(0, 0), Write(0, 0)}, WantW: 0, WantH: 0},
		{
			// Reader 5 paused while writer 9 wrote; reader 7 was granted
			// before writer 9 (which then waited for it) and reads before the
			// write and not after.
			Name:  "paused reader",
			Steps: []RWStep{Read(5, 0), Read(7, 0), Write(9, 0), Read(5, 9), Read(7, 9), Read(9, 0)},
			WantW: 9, WantH: 9,
		},
		{
			// Writer 5 paused; its lock passed to readers 8 and 9, then to
			// writer 12. Readers 8 and 9 read before writer 12 wrote.
			Name: "paused writer",
			Steps: []RWStep{
				Write(5, 0), Read(8, 0), Read(9, 0), Write(5, 9),
				Write(12, 0), Write(5, 12), Read(8, 12), Read(9, 12), Read(12, 0),
			},
			WantW: 12, WantH: 12,
		},
		{
			Name:  "readers hold together: the lower token reads after the higher",
			Steps: []RWStep{Read(8, 0), Read(7, 0), Read(8, 0), Read(6, 0)},
			WantW: 0, WantH: 8,
		},
		{
			Name:  "a write equal to W is a retry of the same grant",
			Steps: []RWStep{Write(9, 0), Write(9, 0), Write(9, 0)},
			WantW: 9, WantH: 9,
		},
		{
			Name:  "a writer reads its own writes",
			Steps: []RWStep{Write(9, 0), Read(9, 0), Write(9, 0)},
			WantW: 9, WantH: 9,
		},
		{
			// A downgraded writer keeps its token as a reader; readers that
			// join it read, and its own writes are refused once they have.
			Name:  "downgrade, readers join",
			Steps: []RWStep{Write(9, 0), Read(9, 0), Read(11, 0), Write(9, 11), Read(9, 0)},
			WantW: 9, WantH: 11,
		},
		{
			Name:  "a write below a reader's token is refused, above it admitted",
			Steps: []RWStep{Read(20, 0), Write(19, 20), Write(21, 0), Read(20, 21)},
			WantW: 21, WantH: 21,
		},
		{
			Name:  "a refusal changes nothing",
			Steps: []RWStep{Write(10, 0), Read(3, 10), Write(4, 10), Read(10, 0)},
			WantW: 10, WantH: 10,
		},
	}
}

// RWWriters picks which of the tokens 1..holders are writers: about a third,
// never two in a row, so that readers hold together between them, and the
// newest, whose writes are never refused.
func RWWriters(holders int) map[uint64]bool {
	w := map[uint64]bool{uint64(holders): true}
	for tok := uint64(2); tok < uint64(holders)-1; tok++ {
		if !w[tok-1] && rand.IntN(3) == 0 {
			w[tok] = true
		}
	}
	return w
}

// RWHolders runs holders with tokens 1..holders, each doing ops operations
// through op concurrently (a writer alternates reads and writes, a reader
// only reads), holder h starting 2(h-1) ms after the first. It returns the
// operations refused, per token.
func RWHolders(t testing.TB, holders, ops int, writers map[uint64]bool, op func(write bool, token uint64) error) map[uint64]int {
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

// CheckRWHistory checks a landed history (the operations that landed, in
// the order they did; reads that ran together in any order): a write's
// token is at least every earlier operation's, a read's at least every
// earlier write's. Every refusal had a reason: an operation with a higher
// token landed, for a reader a write; so the newest holder was never
// refused. Every operation landed or was refused.
func CheckRWHistory(t testing.TB, landed []RWStep, refused map[uint64]int, holders, ops int, writers map[uint64]bool) {
	t.Helper()
	var maxW, maxAll uint64
	reads, writes := 0, 0
	for i, s := range landed {
		if s.Write {
			if s.Token < maxAll {
				t.Fatalf("landed %d: write %d after an operation with token %d", i, s.Token, maxAll)
			}
			maxW = s.Token
			writes++
		} else {
			if s.Token < maxW {
				t.Fatalf("landed %d: read %d after write %d", i, s.Token, maxW)
			}
			reads++
		}
		maxAll = max(maxAll, s.Token)
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
func checkRefusals(t testing.TB, refused map[uint64]int, writers map[uint64]bool, maxW, maxAll uint64) {
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
