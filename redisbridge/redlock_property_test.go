package redisbridge

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// startMultiCluster runs three nodes with bridges and
// --redlock-multi-endpoint, and returns the leader and a client per address.
func startMultiCluster(t *testing.T) (*server.Node, []*redis.Client) {
	t.Helper()
	multi := func(c *Config) { c.RedlockMultiEndpoint = true }
	addr0, leader := startBridge(t, nil, multi)
	require.Eventually(t, func() bool { id, _ := leader.Leader(); return id == leader.ID() }, 10*time.Second, 20*time.Millisecond)
	addrs := []string{addr0}
	for range 2 {
		addr, n := startBridge(t, func(c *server.Config) { c.Join = true }, multi)
		require.NoError(t, leader.Join(t.Context(), n.ID(), n.RaftAddr(), addr))
		require.Eventually(t, func() bool { id, _ := n.Leader(); return id == leader.ID() }, 10*time.Second, 20*time.Millisecond)
		addrs = append(addrs, addr)
	}
	var clients []*redis.Client
	for _, a := range addrs {
		clients = append(clients, newClient(t, a))
	}
	return leader, clients
}

// propSeeds is how many interleavings TestRedlockMultiInterleavings runs:
// FENCER_REDLOCK_SEEDS, or 50.
func propSeeds() int64 {
	if n, err := strconv.Atoi(os.Getenv("FENCER_REDLOCK_SEEDS")); err == nil && n > 0 {
		return int64(n)
	}
	return 50
}

// Owners, each with a value of its own, acquire (SET NX PX), extend and
// release (redsync's scripts) one key through three addresses of one
// cluster run with --redlock-multi-endpoint, every request of an owner sent
// to every address, the deliveries of all owners interleaved at random
// (only each owner's requests to one address keep their order: any
// address's request may be held back past the other owners'). After every
// delivery: a command of a value that does not hold the key changes
// neither its holder nor its token nor its TTL; a value never takes back a
// key that nobody took since it released it; and once a value has held the
// key, each of its releases answers 1. (issue 31, item 2; docs/safety.md)
func TestRedlockMultiInterleavings(t *testing.T) {
	leader, clients := startMultiCluster(t)
	rel := redis.NewScript(redsyncDelete412)
	touch := redis.NewScript(redsyncTouch)
	type event struct {
		owner, addr int
		op          string // acquire, extend, release
	}
	deliveries := 0
	for seed := int64(1); seed <= propSeeds(); seed++ {
		rng := rand.New(rand.NewSource(seed))
		key := fmt.Sprintf("k%d", seed)
		owners := 3 + rng.Intn(3)
		values := make([]string, owners)
		streams := map[[2]int][]string{}
		for o := range owners {
			values[o] = fmt.Sprintf("v%d-%d", seed, o)
			for a := range clients {
				ops := []string{"acquire"}
				if rng.Intn(2) == 0 {
					ops = append(ops, "extend")
				}
				streams[[2]int{o, a}] = append(ops, "release")
			}
		}
		var events []event
		for len(streams) > 0 {
			// a random stream with events left; Go's map order is not the
			// seed's, so pick by sorted index
			var keys [][2]int
			for o := range owners {
				for a := range clients {
					if len(streams[[2]int{o, a}]) > 0 {
						keys = append(keys, [2]int{o, a})
					}
				}
			}
			if len(keys) == 0 {
				break
			}
			k := keys[rng.Intn(len(keys))]
			events = append(events, event{k[0], k[1], streams[k][0]})
			streams[k] = streams[k][1:]
			if len(streams[k]) == 0 {
				delete(streams, k)
			}
		}
		held := make([]bool, owners) // the value has held the key
		lastReleaser := -1           // whose release of the key took effect last
		for i, ev := range events {
			v, c := values[ev.owner], clients[ev.addr]
			where := fmt.Sprintf("seed %d delivery %d: %s by %s at address %d", seed, i, ev.op, v, ev.addr)
			before, wasHeld, err := leader.Status(t.Context(), key)
			require.NoError(t, err, where)
			ttl := 20000 + 10000*rng.Intn(6)
			var reply any
			switch ev.op {
			case "acquire":
				reply, err = c.SetNX(t.Context(), key, v, time.Duration(ttl)*time.Millisecond).Result()
			case "extend":
				reply, err = touch.Run(t.Context(), c, []string{key}, v, ttl).Result()
			case "release":
				reply, err = rel.Run(t.Context(), c, []string{key}, v).Result()
			}
			deliveries++
			after, isHeld, serr := leader.Status(t.Context(), key)
			require.NoError(t, serr, where)
			if isHeld && after.Owner == v && (!wasHeld || before.Owner != v) {
				require.NotEqual(t, lastReleaser, ev.owner, "%s: a value took back a key nobody took since it released it", where)
				require.Equal(t, "acquire", ev.op, "%s: only an acquire takes a key", where)
				require.False(t, wasHeld, "%s: took the key from %s", where, before.Owner)
				held[ev.owner] = true
			}
			if wasHeld && before.Owner != v {
				require.True(t, isHeld, "%s: freed %s's key (reply %v, %v)", where, before.Owner, reply, err)
				require.Equal(t, before.Owner, after.Owner, "%s: changed the holder", where)
				require.Equal(t, before.Token, after.Token, "%s: changed the token", where)
				require.LessOrEqual(t, after.Remaining, before.Remaining+50*time.Millisecond, "%s: changed the TTL", where)
			}
			if wasHeld && before.Owner == v && ev.op == "release" {
				require.False(t, isHeld, "%s: the holder's release", where)
				lastReleaser = ev.owner
			}
			if ev.op == "release" && held[ev.owner] {
				require.NoError(t, err, where)
				require.Equal(t, int64(1), reply, "%s: a release by a value that held the key answers 1", where)
			}
			if ev.op == "extend" && (!wasHeld || before.Owner != v) {
				require.NotEqual(t, int64(1), reply, "%s: an extend of a key the value does not hold", where)
			}
		}
		t.Logf("seed %d: %d owners, %d deliveries", seed, owners, len(events))
	}
	t.Logf("%d interleavings, %d deliveries", propSeeds(), deliveries)
}
