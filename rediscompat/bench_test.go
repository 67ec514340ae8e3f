package rediscompat

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLockPair is one redsync lock and unlock: SET NX PX, then the
// compare-and-delete script by EVALSHA, from parallel clients on distinct
// keys over a real one-node fencer.
func BenchmarkLockPair(b *testing.B) {
	e, _ := newEngine(&testing.T{}, Config{})
	const release = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`
	s := &Session{}
	r, err := e.Do(context.Background(), s, [][]byte{[]byte("script"), []byte("load"), []byte(release)})
	if err != nil {
		b.Fatal(err)
	}
	sha := []byte(r.(Bulk))
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := []byte("bench-" + strconv.FormatInt(next.Add(1), 10))
		val := []byte("v" + string(key))
		ctx := context.Background()
		for pb.Next() {
			r, err := e.Do(ctx, s, [][]byte{[]byte("SET"), key, val, []byte("NX"), []byte("PX"), []byte("8000")})
			if err != nil || r != Status("OK") {
				b.Fatalf("set: %v %v", r, err)
			}
			r, err = e.Do(ctx, s, [][]byte{[]byte("EVALSHA"), sha, []byte("1"), key, val})
			if err != nil || r != Int(1) {
				b.Fatalf("release: %v %v", r, err)
			}
		}
	})
}

// BenchmarkNativePair is BenchmarkLockPair's work done by the node's own
// lock calls (AcquireRedis, Release), without the engine: what the
// Redis-compatible layer adds is the difference.
func BenchmarkNativePair(b *testing.B) {
	_, n := newEngine(&testing.T{}, Config{})
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := "bench-" + strconv.FormatInt(next.Add(1), 10)
		ctx := context.Background()
		for pb.Next() {
			_, ok, err := n.AcquireRedis(ctx, key, "v"+key, 8*time.Second)
			if err != nil || !ok {
				b.Fatal(err)
			}
			if ok, err := n.Release(ctx, key, "v"+key); err != nil || !ok {
				b.Fatal(err)
			}
		}
	})
}
