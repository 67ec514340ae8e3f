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

// BenchmarkReads is a read of four keys, as MGET and as a read-only script
// of four GETs, from parallel clients over a real one-node fencer: the read
// path of a command that writes nothing (server.Node.Update, which checks
// that what it read is still current before it answers).
func BenchmarkReads(b *testing.B) {
	e, _ := newEngine(&testing.T{}, Config{})
	s := &Session{}
	ctx := context.Background()
	if _, err := e.Do(ctx, s, [][]byte{[]byte("MSET"), []byte("a"), []byte("1"), []byte("b"), []byte("2"), []byte("c"), []byte("3"), []byte("d"), []byte("4")}); err != nil {
		b.Fatal(err)
	}
	const script = `return {redis.call('get','a'), redis.call('get','b'), redis.call('get','c'), redis.call('get','d')}`
	for _, bc := range []struct {
		name string
		args [][]byte
	}{
		{"mget", [][]byte{[]byte("MGET"), []byte("a"), []byte("b"), []byte("c"), []byte("d")}},
		{"eval", [][]byte{[]byte("EVAL"), []byte(script), []byte("0")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r, err := e.Do(ctx, s, bc.args)
					if a, ok := r.(Array); err != nil || !ok || len(a) != 4 {
						b.Fatalf("%v %v", r, err)
					}
				}
			})
		})
	}
}
