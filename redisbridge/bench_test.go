package redisbridge

import (
	"bufio"
	"bytes"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/tidwall/redcon"
)

// pipelined returns n FENCE.ACQUIRE commands as a client sends them.
func pipelined(n int) []byte {
	var buf []byte
	for i := range n {
		buf = append(buf, resp.AppendCommand(nil, []byte("FENCE.ACQUIRE"), []byte("orders:"+strconv.Itoa(i)),
			[]byte("3f0c1a9e-worker-7"), []byte("10000"))...)
	}
	return buf
}

// BenchmarkGuard is the stream guard's check of one command (read from a
// pipelined batch of 64), before redcon parses it.
func BenchmarkGuard(b *testing.B) {
	in := pipelined(64)
	g := &guard{maxArgs: 1024, maxBulkLen: 1 << 20, maxCommand: 2 << 20}
	b.SetBytes(int64(len(in) / 64))
	b.ReportAllocs()
	for i := 0; i < b.N; i += 64 {
		g.out = g.out[:0]
		if msg := g.feed(in); msg != "" {
			b.Fatal(msg)
		}
	}
}

// BenchmarkParse is redcon's parse of one command from a pipelined batch of
// 64: what the server does with each request after the guard.
func BenchmarkParse(b *testing.B) {
	in := pipelined(64)
	b.SetBytes(int64(len(in) / 64))
	b.ReportAllocs()
	for i := 0; i < b.N; i += 64 {
		rd := redcon.NewReader(bytes.NewReader(in))
		for range 64 {
			if cmd, err := rd.ReadCommand(); err != nil || len(cmd.Args) != 4 {
				b.Fatalf("%q, %v", cmd.Args, err)
			}
		}
	}
}

// BenchmarkAcquireRelease is one FENCE.ACQUIRE + FENCE.RELEASE pair over
// loopback against a real one-node server (its log store fsyncs): two Raft
// commits. "serial" is one client; "parallel" is 16 clients at once.
func BenchmarkAcquireRelease(b *testing.B) {
	addr, _ := startBridge(b, nil, nil)
	var next atomic.Int64
	pair := func(b *testing.B, c net.Conn, rd *bufio.Reader) {
		i := strconv.FormatInt(next.Add(1), 10)
		key, owner := []byte("k"+i), []byte("o"+i)
		if _, err := c.Write(resp.AppendCommand(nil, []byte("FENCE.ACQUIRE"), key, owner, []byte("10000"))); err != nil {
			b.Fatal(err)
		}
		if r, err := resp.ReadRaw(rd); err != nil || r[0] != '*' {
			b.Fatalf("acquire: %q %v", r, err)
		}
		if _, err := c.Write(resp.AppendCommand(nil, []byte("FENCE.RELEASE"), key, owner)); err != nil {
			b.Fatal(err)
		}
		if r, err := resp.ReadRaw(rd); err != nil || string(r) != ":1\r\n" {
			b.Fatalf("release: %q %v", r, err)
		}
	}
	// Wait for the node to lead.
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = c.Write(resp.AppendCommand(nil, []byte("FENCE.ACQUIRE"), []byte("ready"), []byte("o"), []byte("1000")))
		r, err := resp.ReadRaw(bufio.NewReader(c))
		_ = c.Close()
		if err == nil && r[0] == '*' {
			break
		}
		if time.Since(start) > 10*time.Second {
			b.Fatalf("no leader: %q %v", r, err)
		}
	}
	dial := func(b *testing.B) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		return c, bufio.NewReader(c)
	}
	b.Run("serial", func(b *testing.B) {
		c, rd := dial(b)
		b.ReportAllocs()
		for range b.N {
			pair(b, c, rd)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(8) // 16 clients on 2 cores
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			c, rd := dial(b)
			for pb.Next() {
				pair(b, c, rd)
			}
		})
	})
}
