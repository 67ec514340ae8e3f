package fsm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Page walks a prefix in name order, count at a time, from a cursor, and
// the pages together list every matching key exactly once.
func TestPageWalksInOrder(t *testing.T) {
	a := newApplier()
	tb := a.t
	var want []string
	for i := range 257 {
		k := fmt.Sprintf("app:%03d", (i*7919)%257) // inserted out of order
		a.apply(t, acquire(k, "o", 60000))
		want = append(want, k)
		a.apply(t, acquire(fmt.Sprintf("zz:%d", i), "o", 60000))
	}
	slices.Sort(want)
	for _, count := range []int{1, 10, 256, 257, 1000} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			keys, leases, pos, more := tb.Page("app:", after, count, nil)
			require.Equal(t, tb.Position(), pos)
			require.Len(t, leases, len(keys))
			for i, l := range leases {
				require.Equal(t, "o", l.Owner, keys[i])
			}
			got = append(got, keys...)
			if !more {
				break
			}
			require.Len(t, keys, count)
			after = keys[len(keys)-1]
			require.Less(t, pages, 300)
		}
		require.Equal(t, want, got, "count %d", count)
	}
	keys, _, _, more := tb.Page("app:", "", 5, func(k string, _ *Lease) bool { return strings.HasSuffix(k, "7") })
	require.Equal(t, []string{"app:007", "app:017", "app:027", "app:037", "app:047"}, keys)
	require.True(t, more)
}

// SessionPage lists open sessions by ID from a cursor, with their locks.
func TestSessionPageWalksInOrder(t *testing.T) {
	a := newApplier()
	var ids []uint64
	for i := range 25 {
		id := a.apply(t, openSession(60000)).Position
		ids = append(ids, id)
		for j := range i % 3 {
			a.apply(t, sessionAcquire(fmt.Sprintf("s%d:%d", i, j), "o", id))
		}
	}
	var got []uint64
	after := uint64(0)
	for {
		ss, keys, _, more := a.t.SessionPage(after, 4, 1, nil)
		for i, s := range ss {
			got = append(got, s.ID)
			require.LessOrEqual(t, len(keys[i]), 1)
			require.Equal(t, min(s.Locks, 1), len(keys[i]))
		}
		if !more {
			break
		}
		after = ss[len(ss)-1].ID
	}
	require.Equal(t, ids, got)
}
