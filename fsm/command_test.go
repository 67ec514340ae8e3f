package fsm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	cmds := []Command{
		acquire("k", "owner", 10000),
		{Op: OpAcquire, Key: "k", Owner: "o", TTL: 1, Lease: &LeaseRef{Token: 5, Version: 9}},
		extend("key with spaces", "ö", 1<<40),
		{Op: OpRelease, Key: "k", Owner: "o", Waiter: &Waiter{Owner: "w", TTL: 300}},
		{Op: OpExpire, Key: "k", Lease: &LeaseRef{Token: 1 << 62, Version: 1 << 63}, Waiter: &Waiter{Owner: "w", TTL: 1}},
		{Op: OpRevoke, Key: "k"},
		{Op: OpGrant, Key: "k", Waiter: &Waiter{Owner: "w", TTL: 2}},
		{Op: OpMember, Key: "n1", Owner: "127.0.0.1:7379"},
		{Op: OpAcquire, Key: "k", Owner: "v", TTL: 8000, Redis: true},
	}
	for _, c := range cmds {
		t.Run(c.Op.String(), func(t *testing.T) {
			got, err := Decode(c.Encode(nil))
			require.NoError(t, err)
			assert.Equal(t, c, got)
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	valid := acquire("k", "o", 1).Encode(nil)
	tests := []struct {
		name string
		in   []byte
		err  error
	}{
		{"empty", nil, ErrShortEntry},
		{"unknown version", []byte{2, 1, 0}, ErrEntryVersion},
		{"truncated", valid[:len(valid)-1], ErrShortEntry},
		{"trailing", append(append([]byte(nil), valid...), 0), ErrBadEntry},
		{"unknown op", (&Command{Op: 99, Key: "k", Owner: "o"}).Encode(nil), ErrBadEntry},
		{"unknown flag", []byte{1, 1, 8, 1, 'k', 1, 'o', 1}, ErrBadEntry},
		{"empty key", acquire("", "o", 1).Encode(nil), ErrBadEntry},
		{"acquire without owner", acquire("k", "", 1).Encode(nil), ErrBadEntry},
		{"grant without waiter", (&Command{Op: OpGrant, Key: "k"}).Encode(nil), ErrBadEntry},
		{"expire without lease", (&Command{Op: OpExpire, Key: "k"}).Encode(nil), ErrBadEntry},
		{"huge string", []byte{1, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, ErrBadEntry},
		{"varint overflow", []byte{1, 1, 0, 1, 'k', 1, 'o', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, ErrBadEntry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.in)
			assert.ErrorIs(t, err, tc.err)
		})
	}
}

func TestBatchEntryRoundTrip(t *testing.T) {
	cmds := []Command{
		acquire("k", "owner", 10000),
		{Op: OpRelease, Key: "k", Owner: "o", Waiter: &Waiter{Owner: "w", TTL: 300}},
		{Op: OpExpire, Key: "j", Lease: &LeaseRef{Token: 7, Version: 9}},
	}
	b := EncodeEntry(nil, cmds)
	assert.Equal(t, BatchVersion, b[0])
	got, err := DecodeEntry(b)
	require.NoError(t, err)
	assert.Equal(t, cmds, got)

	one := EncodeEntry(nil, cmds[:1])
	assert.Equal(t, cmds[0].Encode(nil), one, "a batch of one is the plain entry")
	got, err = DecodeEntry(one)
	require.NoError(t, err)
	assert.Equal(t, cmds[:1], got)
}

func TestDecodeEntryRejects(t *testing.T) {
	a, r := acquire("k", "o", 1).Encode(nil), release("k", "o").Encode(nil)
	valid := JoinEntries(nil, [][]byte{a, r})
	tests := []struct {
		name string
		in   []byte
		err  error
	}{
		{"empty", nil, ErrShortEntry},
		{"unknown version", []byte{4, 2}, ErrEntryVersion},
		{"no count", []byte{BatchVersion}, ErrShortEntry},
		{"batch of one", append([]byte{BatchVersion, 1, byte(len(a))}, a...), ErrBadEntry},
		{"batch of none", []byte{BatchVersion, 0}, ErrBadEntry},
		{"count beyond its bytes", []byte{BatchVersion, 0xff, 0xff, 0x03, 1, 1}, ErrBadEntry},
		{"truncated", valid[:len(valid)-1], ErrShortEntry},
		{"trailing", append(append([]byte(nil), valid...), 0), ErrBadEntry},
		{"bad command inside", JoinEntries(nil, [][]byte{a, acquire("", "o", 1).Encode(nil)}), ErrBadEntry},
		{"batch inside a batch", JoinEntries(nil, [][]byte{a, valid}), ErrEntryVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEntry(tc.in)
			assert.ErrorIs(t, err, tc.err)
		})
	}
}

// FuzzDecode checks that no input makes the decoder panic, and that whatever
// it accepts re-encodes to the same bytes, single commands and batches alike.
func FuzzDecode(f *testing.F) {
	for _, c := range []Command{
		acquire("k", "o", 1000),
		{Op: OpRelease, Key: "k", Owner: "o", Waiter: &Waiter{Owner: "w", TTL: 3}},
		{Op: OpExpire, Key: "k", Lease: &LeaseRef{Token: 1, Version: 2}},
		{Op: OpRevoke, Key: "k"},
	} {
		f.Add(c.Encode(nil))
	}
	f.Add(EncodeEntry(nil, []Command{acquire("k", "o", 1000), release("j", "p")}))
	txn := Command{Op: OpTxn, Txn: &Txn{Guards: []Guard{{Key: "j", Mod: 4, Mem: 2}, {Key: "k"}},
		Cmds: []Command{release("j", "p"), acquire("k", "o", 1000)}}}
	f.Add(txn.Encode(nil))
	f.Add(EncodeEntry(nil, []Command{acquire("k", "o", 1000), txn}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := Decode(b); err == nil {
			assert.Equal(t, b, c.Encode(nil))
		}
		cmds, err := DecodeEntry(b)
		if err != nil {
			return
		}
		assert.Equal(t, b, EncodeEntry(nil, cmds))
	})
}

// The largest entry the server can propose (every string at MaxStringLen,
// every field set) decodes and stays under MaxEntrySize.
func TestLargestEntryIsBounded(t *testing.T) {
	long := string(make([]byte, MaxStringLen))
	c := Command{Op: OpRelease, Key: long, Owner: long, TTL: 1<<64 - 1,
		Lease: &LeaseRef{Token: 1<<64 - 1, Version: 1<<64 - 1}, Waiter: &Waiter{Owner: long, TTL: 1<<64 - 1}, Redis: true}
	b := c.Encode(nil)
	assert.LessOrEqual(t, len(b), MaxEntrySize)
	got, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, c, got)
	_, err = Decode(Command{Op: OpAcquire, Key: long + "x", Owner: "o", TTL: 1}.Encode(nil))
	assert.Error(t, err, "a longer string is rejected")
}
