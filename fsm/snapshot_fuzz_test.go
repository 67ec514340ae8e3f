package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzSnapshot checks that no input makes the snapshot decoder panic, that
// what it accepts re-marshals to bytes that decode to the same table, and
// that a table it accepts can go on applying entries (a snapshot whose
// largest token is beyond its log position would make the next grant panic).
func FuzzSnapshot(f *testing.F) {
	a := newApplier()
	a.apply(f, Command{Op: OpMember, Key: "n1", Owner: "127.0.0.1:7379"})
	a.apply(f, acquire("k", "o", 1000))
	a.apply(f, acquire("j", "p", 2000))
	a.apply(f, Command{Op: OpRelease, Key: "k", Owner: "o"})
	f.Add(a.t.MarshalSnapshot())
	f.Add(New().MarshalSnapshot())
	f.Fuzz(func(t *testing.T, b []byte) {
		tb := New()
		if err := tb.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
			return
		}
		again := New()
		require.NoError(t, again.Restore(io.NopCloser(bytes.NewReader(tb.MarshalSnapshot()))))
		assert.Equal(t, tb.MarshalSnapshot(), again.MarshalSnapshot())
		if tb.LastIndex() == 1<<64-1 {
			return
		}
		for i, c := range []Command{acquire("fresh key", "fresh owner", 1), acquire("k", "fresh owner", 1)} {
			r := tb.ApplyCommand(tb.LastIndex()+1, c)
			if r.Code == Granted {
				assert.Greater(t, r.Lease.Token, uint64(0), "entry %d", i)
			}
		}
	})
}
