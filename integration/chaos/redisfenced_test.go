//go:build linux

package chaos

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// The Redis-compatible workloads: the same fenced read-modify-write as
// workload 3, but with locks taken the ways Redis lock clients take them, so
// that leader changes and the other faults meet the Lua engine and the
// keyspace. Their grants join every checker (no early expiry, tokens, the
// fenced store).
//
//   - wlRedisLua: SET key value NX PX, then FENCE.TOKEN key value; the lock
//     is extended with the extend script and released with the release
//     script printed on Redis's distributed-lock page, run by the Lua engine.
//   - wlRedsync: go-redsync/redsync's Mutex (its SET NX and its EVALSHA
//     release and extend scripts), through go-redis, on the client's node.
//   - wlRedsyncEvery: the same, with a pool per node of the cluster, as
//     Redlock over independent masters (the cluster runs with
//     --redlock-multi-endpoint); every request reaches the leader once per
//     address, in any order with other clients'.

const (
	// redisRelease and redisExtend are the scripts of Redis's
	// distributed-lock page.
	redisRelease = `if redis.call("get",KEYS[1]) == ARGV[1] then
    return redis.call("del",KEYS[1])
else
    return 0
end`
	redisExtend = `if redis.call("get",KEYS[1]) == ARGV[1] then
    return redis.call("pexpire",KEYS[1],ARGV[2])
else
    return 0
end`
)

// runRedisLua is workload wlRedisLua.
func (w *fencedWorkload) runRedisLua(cl *client, stop <-chan struct{}) {
	for !stopped(stop) {
		key := fmt.Sprintf("rreg-%d", cl.rng.IntN(fencedKeys))
		owner := cl.owner()
		deadline := time.Now().Add(fencedWait)
		for !stopped(stop) && time.Now().Before(deadline) {
			v, out, call, ret := cl.do(clientTimeout, "SET", key, owner, "NX", "PX", ms(fencedTTL))
			if out == unknown {
				redisReleaseUntilKnown(cl, key, owner, nil)
				break
			}
			if out != ok || v != "OK" {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			g := grant{workload: "redis-lua", key: key, owner: owner, ttl: fencedTTL, call: call, ret: ret, validUntil: call + int64(fencedTTL)}
			tv, tout, _, _ := cl.do(clientTimeout, "FENCE.TOKEN", key, owner)
			tok, isInt := tv.(int64)
			if tout != ok || !isInt || tok <= 0 {
				// The lease ran out (a fault) before the token was read:
				// this grant's token is unknown; give it back.
				redisReleaseUntilKnown(cl, key, owner, nil)
				break
			}
			g.token = uint64(tok)
			if cl.rng.IntN(2) == 0 {
				ev, eout, ecall, _ := cl.do(clientTimeout, "EVAL", redisExtend, "1", key, owner, ms(fencedTTL))
				if eout == ok && ev == int64(1) {
					g.validUntil = max(g.validUntil, ecall+int64(fencedTTL))
				}
			}
			w.readModifyWrite(cl, key, owner, g.token)
			redisReleaseUntilKnown(cl, key, owner, &g)
			w.grants.add(g)
			break
		}
		cl.think()
	}
}

// redisReleaseUntilKnown sends the release script until its outcome is
// known. Repeating it is harmless: once the lock is gone, or held by
// another value, it deletes nothing.
func redisReleaseUntilKnown(cl *client, key, owner string, g *grant) {
	releaseUntilKnownBy(cl, g, "EVAL", redisRelease, "1", key, owner)
}

// redsyncPool is a redsync pool over a go-redis client of node i of c,
// dialled from the hub namespace; close closes it.
func redsyncPool(c *cluster, i int) (pool redsyncredis.Pool, close func()) {
	addr := c.nodes[i].addr()
	rc := redis.NewClient(&redis.Options{
		Addr:         addr,
		Dialer:       func(ctx context.Context, _, _ string) (net.Conn, error) { return c.nw.dial(addr, time.Second) },
		MaxRetries:   -1,
		ReadTimeout:  clientTimeout,
		WriteTimeout: clientTimeout,
		PoolSize:     2,
	})
	return goredis.NewPool(rc), func() { _ = rc.Close() }
}

// runRedsync is workload wlRedsync: redsync on the client's node.
func (w *fencedWorkload) runRedsync(cl *client, c *cluster, stop <-chan struct{}) {
	p, closePool := redsyncPool(c, cl.node)
	defer closePool()
	w.redsyncLoop(cl, redsync.New(p), "redsync", "rsreg", stop)
}

// runRedsyncEvery is workload wlRedsyncEvery: redsync with a pool per node.
func (w *fencedWorkload) runRedsyncEvery(cl *client, c *cluster, stop <-chan struct{}) {
	var pools []redsyncredis.Pool
	for i := range c.nodes {
		p, closePool := redsyncPool(c, i)
		defer closePool()
		pools = append(pools, p)
	}
	w.redsyncLoop(cl, redsync.New(pools...), "redsync-every", "rsereg", stop)
}

// everyUnlocks and everyUnlockFails count wlRedsyncEvery's Unlock calls and
// those that failed (a fault may fail one: its lease ran out, or a majority
// of the addresses did not answer), for the run's log.
var everyUnlocks, everyUnlockFails atomic.Int64

// redsyncLoop takes, uses and releases redsync mutexes on keys named
// prefix-n until stop, recording the grants as workload's.
func (w *fencedWorkload) redsyncLoop(cl *client, rs *redsync.Redsync, workload, prefix string, stop <-chan struct{}) {
	for !stopped(stop) {
		key := fmt.Sprintf("%s-%d", prefix, cl.rng.IntN(fencedKeys))
		m := rs.NewMutex(key, redsync.WithExpiry(fencedTTL), redsync.WithTries(int(fencedWait/(50*time.Millisecond))),
			redsync.WithRetryDelay(50*time.Millisecond), redsync.WithTimeoutFactor(0.2))
		call := cl.clk.now()
		err := m.Lock()
		ret := cl.clk.now()
		if !cl.count.tally(err) {
			// A Lock that failed may still hold the key on the server
			// (its reply lost); redsync has released what it knew of.
			cl.think()
			continue
		}
		until := int64(m.Until().Sub(cl.clk.start))
		g := grant{workload: workload, key: key, owner: m.Value(), ttl: fencedTTL, call: call, ret: ret, validUntil: until}
		tv, tout, _, _ := cl.do(clientTimeout, "FENCE.TOKEN", key, m.Value())
		tok, isInt := tv.(int64)
		if tout == ok && isInt && tok > 0 {
			g.token = uint64(tok)
			if cl.rng.IntN(2) == 0 {
				ecall := cl.clk.now()
				if ok, err := m.Extend(); err == nil && ok {
					g.validUntil = max(g.validUntil, ecall+int64(fencedTTL))
				}
			}
			w.readModifyWrite(cl, key, m.Value(), g.token)
		}
		g.released = cl.clk.now()
		// An Unlock that fails (the lease ran out under a fault, or its
		// outcome is unknown) leaves the key to its TTL.
		ok, err := m.Unlock()
		if workload == "redsync-every" {
			everyUnlocks.Add(1)
			if !ok || err != nil {
				everyUnlockFails.Add(1)
			}
		}
		if g.token != 0 {
			w.grants.add(g)
		}
		cl.think()
	}
}
