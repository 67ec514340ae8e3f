package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func putString(key, value string, ttl uint64) Command {
	return Command{Op: OpPut, Key: key, Owner: value, TTL: ttl}
}

func putKind(key string, kind Kind, data string, ttl uint64, keep bool) Command {
	return Command{Op: OpPut, Key: key, Kind: kind, Data: data, TTL: ttl, KeepTTL: keep}
}

// Tokens are defined by what a write does: a string gets a new one when it is
// created or its value changes, and keeps it on a same-value write or a TTL
// change; a hash gets one when created; other kinds have none.
func TestPutTokens(t *testing.T) {
	a := newApplier()
	r := a.apply(t, putString("s", "v1", 1000))
	require.Equal(t, Written, r.Code)
	assert.True(t, r.Created)
	assert.Equal(t, r.Position, r.Lease.Token, "created: a new token")
	first := r.Lease

	r = a.apply(t, putString("s", "v1", 5000))
	assert.False(t, r.Created)
	assert.Equal(t, first.Token, r.Lease.Token, "same value: the same token")
	assert.Equal(t, r.Position, r.Lease.Version, "a new TTL starts a new lease version")
	assert.EqualValues(t, 5000, r.Lease.TTL)

	keep := Command{Op: OpPut, Key: "s", Owner: "v1", KeepTTL: true}
	r = a.apply(t, keep)
	assert.Equal(t, first.Token, r.Lease.Token)
	assert.EqualValues(t, 5000, r.Lease.TTL, "KeepTTL keeps the TTL")
	assert.Equal(t, r.Position-1, r.Lease.Version, "and the lease version")
	assert.Equal(t, r.Position, r.Lease.Mod, "but it is a write")

	keep.Owner = "v2"
	r = a.apply(t, keep)
	assert.Equal(t, r.Position, r.Lease.Token, "a new value: a new token")
	assert.EqualValues(t, 5000, r.Lease.TTL)
	assert.Equal(t, r.Position, r.Lease.Version, "a new token is a new lease version")

	r = a.apply(t, putKind("h", KindHash, "enc1", 0, false))
	assert.True(t, r.Created)
	assert.Equal(t, r.Position, r.Lease.Token, "a hash gets a token when created")
	hashTok := r.Lease.Token
	r = a.apply(t, putKind("h", KindHash, "enc2", 0, true))
	assert.Equal(t, hashTok, r.Lease.Token, "and keeps it")
	assert.EqualValues(t, 0, r.Lease.TTL, "no TTL: the key does not expire")

	r = a.apply(t, putKind("z", KindZSet, "enc", 100, false))
	assert.Zero(t, r.Lease.Token, "a sorted set has no token")

	// A key of another kind is replaced: freed, and created anew.
	r = a.apply(t, putString("h", "now a string", 0))
	require.NotNil(t, r.Freed)
	assert.Equal(t, KindHash, r.Freed.Kind)
	assert.True(t, r.Created)
	assert.Equal(t, r.Position, r.Lease.Token)
}

// Lock commands see a key of another kind as held by nobody they know.
func TestLockCommandsOnOtherKinds(t *testing.T) {
	a := newApplier()
	a.apply(t, putKind("h", KindHash, "x", 0, false))
	assert.Equal(t, Held, a.apply(t, acquire("h", "o", 1000)).Code)
	assert.Equal(t, NotHolder, a.apply(t, extend("h", "o", 1000)).Code)
	assert.Equal(t, NotHolder, a.apply(t, release("h", "o")).Code)
	assert.Equal(t, Revoked, a.apply(t, Command{Op: OpRevoke, Key: "h"}).Code, "a revoke (DEL) frees any kind")

	// A string written by a put is a lock whose owner is the value.
	a.apply(t, putString("s", "me", 1000))
	assert.Equal(t, Renewed, a.apply(t, acquire("s", "me", 2000)).Code)
	assert.Equal(t, Released, a.apply(t, release("s", "me")).Code)
}

func TestPutEncodingAndRejects(t *testing.T) {
	for _, c := range []Command{
		putString("k", "", 0),
		putString("k", "value", 1000),
		putKind("k", KindList, "\x00\x01", 0, true),
		{Op: OpTxn, Txn: &Txn{Guards: []Guard{{Key: "k"}}, Cmds: []Command{putKind("k", KindHash, "d", 10, false)}}},
	} {
		got, err := Decode(c.Encode(nil))
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
	for name, c := range map[string]Command{
		"unknown kind":           putKind("k", 9, "", 0, false),
		"string with data":       {Op: OpPut, Key: "k", Kind: KindString, Data: "x"},
		"hash with owner":        {Op: OpPut, Key: "k", Kind: KindHash, Owner: "x"},
		"keep and set a TTL":     putKind("k", KindHash, "", 5, true),
		"keep on an acquire":     {Op: OpAcquire, Key: "k", Owner: "o", KeepTTL: true},
		"put with a waiter":      {Op: OpPut, Key: "k", Waiter: &Waiter{Owner: "w"}},
		"put with Redis flag":    {Op: OpPut, Key: "k", Redis: true},
		"put without a key":      putString("", "v", 0),
		"put with a lease ref":   {Op: OpPut, Key: "k", Lease: &LeaseRef{Token: 1}},
		"value over MaxValueLen": putKind("k", KindHash, string(make([]byte, MaxValueLen+1)), 0, false),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(c.Encode(nil))
			assert.ErrorIs(t, err, ErrBadEntry)
		})
	}
	long := string(make([]byte, MaxValueLen))
	c := putString("k", long, 0)
	got, err := Decode(c.Encode(nil))
	require.NoError(t, err, "a string value may be as long as MaxValueLen")
	assert.Equal(t, c, got)
	assert.LessOrEqual(t, len(c.Encode(nil)), MaxEntrySize)
}

// Keys of every kind, with and without TTLs, survive a snapshot exactly.
func TestSnapshotKeepsKindsAndData(t *testing.T) {
	a := newApplier()
	a.apply(t, acquire("lock", "o", 1000))
	a.apply(t, putString("empty", "", 0))
	a.apply(t, putKind("h", KindHash, "hash-bytes", 500, false))
	a.apply(t, putKind("l", KindList, "list-bytes", 0, false))
	b := a.t.MarshalSnapshot()
	n := New()
	require.NoError(t, n.Restore(io.NopCloser(bytes.NewReader(b))))
	assert.Equal(t, b, n.MarshalSnapshot())
	for _, k := range []string{"lock", "empty", "h", "l"} {
		want, _ := a.t.Get(k)
		got, ok := n.Get(k)
		require.True(t, ok, k)
		assert.Equal(t, want, got, k)
	}
}

// A snapshot written before keys had kinds (version 2: every key a lock)
// still restores, each key a string whose last write was its last grant.
func TestRestoresVersion2Snapshots(t *testing.T) {
	var b []byte
	b = append(b, "FNCS"...)
	b = append(b, 2)
	b = append(b, 0, 9, 7)        // floor, last index, max token
	b = append(b, 1)              // one lease
	b = appendString(b, "lock")   // key
	b = appendString(b, "owner")  // owner
	b = append(b, 7)              // token
	b = append(b, 0xe8, 0x07)     // TTL 1000
	b = append(b, 8)              // version
	b = append(b, 0)              // no release memory
	b = append(b, 1)              // one member
	b = appendString(b, "n1")     //
	b = appendString(b, "addr:1") //
	n := New()
	require.NoError(t, n.Restore(io.NopCloser(bytes.NewReader(b))))
	l, ok := n.Get("lock")
	require.True(t, ok)
	assert.Equal(t, Lease{Owner: "owner", Token: 7, TTL: 1000, Version: 8, Mod: 8, Kind: KindString}, l)
	assert.Equal(t, "addr:1", n.Members()["n1"])
}

// A version 5 snapshot's release memory (one release per key) restores,
// and one key's releases by several owners (version 6) restore and are
// forgotten in the order they were remembered; a version 5 snapshot that
// repeats a key is corrupt.
func TestRestoresReleaseMemoryOfEveryVersion(t *testing.T) {
	snap := func(version byte, mem ...string) []byte {
		var b []byte
		b = append(b, "FNCS"...)
		b = append(b, version)
		b = append(b, 0, 9, 0) // floor, last index, max token
		b = append(b, 0)       // no leases
		b = append(b, byte(len(mem)/2))
		for i := 0; i < len(mem); i += 2 {
			b = appendString(b, mem[i])   // key
			b = appendString(b, mem[i+1]) // owner
			// token, position (a release of a grant: token 0 is a
			// give-up's, Command.GiveUp, that released nothing)
			b = append(b, 1, byte(2+i))
		}
		b = append(b, 0, 0) // no members, no sessions
		if version >= 7 {
			b = append(b, 0) // no cluster ID
		}
		return b
	}
	old := New()
	require.NoError(t, old.Restore(io.NopCloser(bytes.NewReader(snap(5, "k", "a", "j", "b")))))
	assert.True(t, old.Remembered("k", "a"))
	assert.True(t, old.Remembered("j", "b"))
	assert.Equal(t, uint64(2), old.Guard("k").Mem)

	bad := New()
	require.ErrorIs(t, bad.Restore(io.NopCloser(bytes.NewReader(snap(5, "k", "a", "k", "b")))), ErrBadSnapshot)

	n := New()
	n.memMax = 1
	require.NoError(t, n.Restore(io.NopCloser(bytes.NewReader(snap(6, "k", "a", "k", "b")))))
	assert.True(t, n.Remembered("k", "a"))
	assert.True(t, n.Remembered("k", "b"))
	assert.Equal(t, uint64(4), n.Guard("k").Mem, "the newest release's position")
	assert.Equal(t, snap(7, "k", "a", "k", "b"), n.MarshalSnapshot(), "the same bytes again, in the current version")
	last, ok := n.LastReleased("k")
	assert.True(t, ok)
	assert.Equal(t, "b", last)
	n.ApplyCommand(10, Command{Op: OpAcquire, Key: "x", Owner: "c", TTL: 1000})
	n.ApplyCommand(11, Command{Op: OpRelease, Key: "x", Owner: "c"})
	assert.False(t, n.Remembered("k", "a"), "past memMax keys, the oldest releases go first")
	assert.False(t, n.Remembered("k", "b"), "and a key's newest is its last")
	assert.True(t, n.Remembered("x", "c"))
	require.ErrorIs(t, New().Restore(io.NopCloser(bytes.NewReader(snap(6, "k", "a", "k", "a")))), ErrBadSnapshot)
}
