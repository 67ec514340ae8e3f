// Package fencetest holds the checks the tests of fence's validators share
// (fence.Memory, fencesql, fenceredis, fencehttp): a refusal's fields, and
// holders with interleaved tokens writing at once, whose landed writes must
// be in token order; and for the read-write validators (rw.go) the
// scripted histories and readers and writers at once.
package fencetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence"
)

// WantStale fails the test unless err is a *fence.StaleTokenError for
// resource, token and highest.
func WantStale(t testing.TB, err error, resource string, token, highest uint64) {
	t.Helper()
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) {
		t.Fatalf("err = %v, want a *fence.StaleTokenError", err)
	}
	if stale.Resource != resource || stale.Token != token || stale.Highest != highest {
		t.Fatalf("StaleTokenError %+v, want resource %q, token %d, highest %d", *stale, resource, token, highest)
	}
}

// Refusal sorts the outcome of a write with token for Writers: refused if
// err is a *fence.StaleTokenError that refuses token for a higher one, err
// if it is any other error.
func Refusal(token uint64, err error) (refused bool, _ error) {
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) && stale.Token == token && stale.Highest > token {
		return true, nil
	}
	return false, err
}

// Writers runs holders with tokens 1..holders, each writing writes times
// through write, concurrently; holder h starts 2(h-1) ms after the first, so
// that each overlaps the next few, as a paused holder overlaps its
// successors. write reports whether the validator refused the write, or an
// error, which fails the test and stops that holder. Writers returns how
// often each token was refused, indexed by token.
func Writers(t testing.TB, holders, writes int, write func(token uint64, i int) (refused bool, err error)) []int {
	t.Helper()
	refused := make([]int, holders+1)
	var wg sync.WaitGroup
	for h := 1; h <= holders; h++ {
		wg.Go(func() {
			time.Sleep(time.Duration(h-1) * 2 * time.Millisecond)
			for i := range writes {
				if rand.IntN(3) == 0 {
					time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
				}
				no, err := write(uint64(h), i)
				if err != nil {
					t.Errorf("holder %d, write %d: %v", h, i, err)
					return
				}
				if no {
					refused[h]++
				}
			}
		})
	}
	wg.Wait()
	return refused
}

// CheckHistory checks what Writers did: in each landed history (the tokens
// of the writes that landed on one resource, in the order they landed) a
// lower token never lands after a higher one; some write landed; the newest
// holder was never refused; and every write either landed or was refused.
func CheckHistory(t testing.TB, refused []int, holders, writes int, landed ...[]uint64) {
	t.Helper()
	total := 0
	for _, history := range landed {
		for i := 1; i < len(history); i++ {
			if history[i] < history[i-1] {
				t.Fatalf("a write with token %d landed after one with token %d (%d of %d)", history[i], history[i-1], i, len(history))
			}
		}
		total += len(history)
		t.Logf("%d writes landed; tokens landed: %s", len(history), runs(history))
	}
	if total == 0 {
		t.Fatal("no write landed")
	}
	if refused[holders] != 0 {
		t.Errorf("the newest holder (token %d) was refused %d times", holders, refused[holders])
	}
	for _, n := range refused {
		total += n
	}
	if total != holders*writes {
		t.Errorf("%d writes landed or were refused, want %d", total, holders*writes)
	}
}

// runs abbreviates a landing history: 1×3 2×1 5×12 …
func runs(tokens []uint64) string {
	var sb strings.Builder
	for i := 0; i < len(tokens); {
		j := i
		for j < len(tokens) && tokens[j] == tokens[i] {
			j++
		}
		fmt.Fprintf(&sb, "%d×%d ", tokens[i], j-i)
		i = j
	}
	return strings.TrimSpace(sb.String())
}
