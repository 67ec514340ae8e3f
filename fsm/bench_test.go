package fsm

import (
	"bytes"
	"io"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkApplyAcquireRelease is the FSM's share of one acquire+release
// pair: decoding both entries and applying them to a table that holds
// `held` other locks. Reported per pair. (Redis semantics: a plain release
// would be remembered and refuse the same owner's next acquire.)
func BenchmarkApplyAcquireRelease(b *testing.B) {
	for _, held := range []int{0, 100000} {
		b.Run("held="+strconv.Itoa(held), func(b *testing.B) {
			t := New()
			var index uint64
			for i := range held {
				index++
				t.ApplyCommand(index, acquire("held-"+strconv.Itoa(i), "o", 60000))
			}
			keys := make([]string, 1024)
			for i := range keys {
				keys[i] = "bench-" + strconv.Itoa(i)
			}
			acq := make([][]byte, len(keys))
			rel := make([][]byte, len(keys))
			for i, k := range keys {
				rel[i] = Command{Op: OpRelease, Key: k, Owner: "owner-" + k, Redis: true}.Encode(nil)
				acq[i] = Command{Op: OpAcquire, Key: k, Owner: "owner-" + k, TTL: 10000, Redis: true}.Encode(nil)
			}
			var l raft.Log
			l.Type = raft.LogCommand
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				j := i % len(keys)
				index++
				l.Index, l.Data = index, acq[j]
				if r := t.Apply(&l).(*Result); r.Code != Granted {
					b.Fatalf("acquire: %v", r.Code)
				}
				index++
				l.Index, l.Data = index, rel[j]
				if r := t.Apply(&l).(*Result); r.Code != Released {
					b.Fatalf("release: %v", r.Code)
				}
			}
		})
	}
}

// BenchmarkEncodeDecode is one acquire entry's encoding and decoding.
func BenchmarkEncodeDecode(b *testing.B) {
	c := Command{Op: OpAcquire, Key: "orders:42", Owner: "3f0c1a9e-worker-7", TTL: 10000}
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for range b.N {
		buf = c.Encode(buf[:0])
		if _, err := Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTxnEncodeDecode is a transaction's encoding, length and
// decoding: the usual one (a key read, one command), which decodes in one
// allocation besides its strings, and a larger one.
func BenchmarkTxnEncodeDecode(b *testing.B) {
	acq := Command{Op: OpAcquire, Key: "orders:42", Owner: "3f0c1a9e-worker-7", TTL: 10000}
	larger := &Txn{Scans: []Scan{{Pattern: "orders:*", Count: 4, Digest: 0x9e3779b97f4a7c15}}}
	for i := range 4 {
		k := "orders:" + strconv.Itoa(40+i)
		larger.Guards = append(larger.Guards, Guard{Key: k, Mod: uint64(100 + i), Mem: uint64(i)})
		larger.Cmds = append(larger.Cmds, Command{Op: OpAcquire, Key: k, Owner: "3f0c1a9e-worker-7", TTL: 10000})
	}
	for _, tc := range []struct {
		name string
		txn  *Txn
	}{
		{"one", &Txn{Guards: []Guard{{Key: "orders:42", Mod: 1234, Mem: 0}}, Cmds: []Command{acq}}},
		{"guards=4,scans=1,cmds=4", larger},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := Command{Op: OpTxn, Txn: tc.txn}
			buf := make([]byte, 0, 512)
			b.ReportAllocs()
			for range b.N {
				buf = c.Encode(buf[:0])
				if tc.txn.Size() != len(buf) {
					b.Fatal("Size differs from the encoding's length")
				}
				if _, err := Decode(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// millionTable returns a table holding n leases.
func millionTable(b *testing.B, n int) *Table {
	b.Helper()
	t := New()
	for i := range n {
		k := "lock/" + strconv.Itoa(i)
		t.ApplyCommand(uint64(i+1), Command{Op: OpAcquire, Key: k, Owner: "owner-" + strconv.Itoa(i), TTL: 86400000})
	}
	return t
}

// BenchmarkSnapshot1M is the snapshot of a table of a million leases: the
// copy under the table's lock, then the sorted encoding Persist writes.
func BenchmarkSnapshot1M(b *testing.B) {
	t := millionTable(b, 1000000)
	b.ResetTimer()
	for range b.N {
		var buf bytes.Buffer
		if err := t.snapshotLocked().writeTo(&buf); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(buf.Len()))
	}
}

// BenchmarkRestore1M decodes the snapshot of a million leases.
func BenchmarkRestore1M(b *testing.B) {
	data := millionTable(b, 1000000).MarshalSnapshot()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		if err := New().Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			b.Fatal(err)
		}
	}
}
