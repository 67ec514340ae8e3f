package fsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// oldMemory is the release memory as it was before every owner's release
// was remembered (snapshot version 5 and before): one release per key, the
// newest, forgotten by the window or past the count of keys, oldest first.
type oldMemory struct {
	mem map[string]struct {
		owner string
		pos   uint64
	}
	queue []struct {
		key string
		pos uint64
	}
	window uint64
	max    int
}

func (m *oldMemory) remember(key, owner string, pos uint64) {
	m.mem[key] = struct {
		owner string
		pos   uint64
	}{owner, pos}
	m.queue = append(m.queue, struct {
		key string
		pos uint64
	}{key, pos})
}

func (m *oldMemory) forget(pos uint64) {
	for len(m.queue) > 0 {
		ref := m.queue[0]
		r, ok := m.mem[ref.key]
		switch {
		case !ok || r.pos != ref.pos:
		case len(m.mem) > m.max || ref.pos+m.window <= pos:
			delete(m.mem, ref.key)
		default:
			return
		}
		m.queue = m.queue[1:]
	}
}

// Every key's newest remembered release, the guard it gives (Guard.Mem) and
// so every acquire's outcome, are what they were when only that release was
// remembered: a log written before applies as it did. Random acquires and
// releases of a few owners on a few keys, with the bounds lowered so that
// both forget.
func TestNewestReleaseIsRememberedAsBefore(t *testing.T) {
	for seed := int64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewSource(seed))
		a := newApplier()
		a.t.memWindow, a.t.memMax, a.t.memPerKey = 40, 3, 2
		old := &oldMemory{mem: map[string]struct {
			owner string
			pos   uint64
		}{}, window: 40, max: 3}
		holder := map[string]string{}
		for i := 0; i < 400; i++ {
			key := fmt.Sprintf("k%d", rng.Intn(5))
			owner := fmt.Sprintf("o%d", rng.Intn(6))
			var c Command
			if rng.Intn(2) == 0 {
				c = acquire(key, owner, 1000000)
			} else {
				c = release(key, owner)
			}
			want := Code(0)
			r0, remembered := old.mem[key]
			switch {
			case c.Op == OpAcquire && holder[key] == "" && remembered && r0.owner == owner:
				want = Refused
			case c.Op == OpAcquire && holder[key] == "":
				want, holder[key] = Granted, owner
			case c.Op == OpAcquire && holder[key] == owner:
				want = Renewed
			case c.Op == OpAcquire:
				want = Held
			case holder[key] == owner:
				want, holder[key] = Released, ""
			}
			r := a.apply(t, c)
			if want != 0 {
				require.Equal(t, want, r.Code, "seed %d step %d: %v %s %s", seed, i, c.Op, key, owner)
			} else {
				require.Contains(t, []Code{NotHolder, AlreadyReleased}, r.Code, "seed %d step %d", seed, i)
			}
			if r.Code == Released {
				old.remember(key, owner, r.Position)
			}
			old.forget(r.Position)
			for k := range 5 {
				key := fmt.Sprintf("k%d", k)
				r0, ok := old.mem[key]
				last, got := a.t.LastReleased(key)
				require.Equal(t, ok, got, "seed %d step %d: %s remembered", seed, i, key)
				if ok {
					require.Equal(t, r0.owner, last, "seed %d step %d: %s's newest release", seed, i, key)
					require.Equal(t, r0.pos, a.t.Guard(key).Mem, "seed %d step %d: %s's guard", seed, i, key)
				} else {
					require.Zero(t, a.t.Guard(key).Mem, "seed %d step %d", seed, i)
				}
			}
			require.LessOrEqual(t, len(a.t.mem), a.t.memMax+1, "seed %d: the keys remembered stay bounded", seed)
			n := 0
			for _, rs := range a.t.mem {
				require.LessOrEqual(t, len(rs), a.t.memPerKey, "seed %d", seed)
				n += len(rs)
			}
			require.Equal(t, n, a.t.memCount, "seed %d", seed)
		}
	}
}

func giveUp(key, owner string) Command {
	return Command{Op: OpRelease, Key: key, Owner: owner, GiveUp: true}
}

// A release with GiveUp by an owner that holds nothing is remembered
// (token 0): the owner's acquire and hand-off after it are refused until
// someone else is granted the key after it; its repeat answers as it did
// (NotHolder). A release without the flag, as every entry written before it,
// is not remembered when the owner holds nothing.
func TestGiveUpReleaseRefusesLaterGrants(t *testing.T) {
	a := newApplier()
	// Without the flag: as before.
	require.Equal(t, NotHolder, a.apply(t, release("old", "o")).Code)
	require.Equal(t, Granted, a.apply(t, acquire("old", "o", 1000)).Code)

	// On a free key.
	require.Equal(t, NotHolder, a.apply(t, giveUp("free", "o")).Code)
	require.Equal(t, Refused, a.apply(t, acquire("free", "o", 1000)).Code)
	require.Equal(t, NotHolder, a.apply(t, giveUp("free", "o")).Code, "a repeat released nothing either")
	require.Equal(t, NotHolder, a.apply(t, release("free", "o")).Code)
	r := a.apply(t, Command{Op: OpGrant, Key: "free", Waiter: &Waiter{Owner: "o", TTL: 1000}})
	require.Equal(t, WaiterRefused, r.Waiter)
	require.False(t, a.t.Has("free"))
	// Another owner's give-up after it does not lift the refusal.
	require.Equal(t, NotHolder, a.apply(t, giveUp("free", "p")).Code)
	require.Equal(t, Refused, a.apply(t, acquire("free", "o", 1000)).Code)
	// A grant to another after it does.
	require.Equal(t, Granted, a.apply(t, acquire("free", "q", 1000)).Code)
	require.Equal(t, Released, a.apply(t, release("free", "q")).Code)
	require.Equal(t, Granted, a.apply(t, acquire("free", "o", 1000)).Code)

	// Held by x across o's give-up: x's release hands the key to o's
	// wait, and that is refused; so is o's acquire; x's is, as before.
	require.Equal(t, Granted, a.apply(t, acquire("held", "x", 1000)).Code)
	require.Equal(t, NotHolder, a.apply(t, giveUp("held", "o")).Code)
	rel := release("held", "x")
	rel.Waiter = &Waiter{Owner: "o", TTL: 1000}
	r = a.apply(t, rel)
	require.Equal(t, Released, r.Code)
	require.Equal(t, WaiterRefused, r.Waiter)
	require.Equal(t, Refused, a.apply(t, acquire("held", "o", 1000)).Code)
	require.Equal(t, Refused, a.apply(t, acquire("held", "x", 1000)).Code)
	require.Equal(t, Granted, a.apply(t, acquire("held", "y", 1000)).Code)

	// A holder's give-up is its release; a repeat of it keeps answering
	// as a remembered release, and renews the refusal.
	require.Equal(t, Granted, a.apply(t, acquire("mine", "m", 1000)).Code)
	require.Equal(t, Released, a.apply(t, giveUp("mine", "m")).Code)
	require.Equal(t, Granted, a.apply(t, acquire("mine", "n", 1000)).Code)
	require.Equal(t, Released, a.apply(t, release("mine", "n")).Code)
	require.Equal(t, AlreadyReleased, a.apply(t, giveUp("mine", "m")).Code)
	require.Equal(t, Refused, a.apply(t, acquire("mine", "m", 1000)).Code)

	// A snapshot keeps the give-ups.
	snap := a.t.MarshalSnapshot()
	b := New()
	require.NoError(t, b.Restore(io.NopCloser(bytes.NewReader(snap))))
	require.True(t, b.Refuses("held", "o"))
	require.False(t, b.Refuses("held", "y"))
	require.True(t, b.Refuses("mine", "m"))
	require.Equal(t, snap, b.MarshalSnapshot())
}

// GiveUp belongs to a plain release only.
func TestGiveUpFlagOnlyOnAPlainRelease(t *testing.T) {
	for _, c := range []Command{
		{Op: OpAcquire, Key: "k", Owner: "o", TTL: 1, GiveUp: true},
		{Op: OpRelease, Key: "k", Owner: "o", Redis: true, GiveUp: true},
		{Op: OpRelease, Key: "k", Owner: "o", Session: 3, GiveUp: true},
		{Op: OpSessionClose, Session: 3, GiveUp: true},
	} {
		_, err := Decode(c.Encode(nil))
		require.ErrorIs(t, err, ErrBadEntry, "%+v", c)
	}
	c := giveUp("k", "o")
	got, err := Decode(c.Encode(nil))
	require.NoError(t, err)
	require.Equal(t, c, got)
}
