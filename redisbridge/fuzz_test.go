package redisbridge

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// FuzzGuard feeds arbitrary bytes to the RESP stream checker, whole and one
// byte at a time: it must not panic, must give the same result however the
// bytes are split, and must hold no more than one command's worth.
func FuzzGuard(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		newGuard := func() *guard { return &guard{maxArgs: 8, maxBulkLen: 64, maxCommand: 256} }
		whole := newGuard()
		wholeErr := whole.feed(data)
		split := newGuard()
		splitErr := ""
		for i := range data {
			if splitErr = split.feed(data[i : i+1]); splitErr != "" {
				break
			}
			if len(split.held) > split.maxCommand+maxHeader {
				t.Fatalf("holds %d bytes", len(split.held))
			}
		}
		if wholeErr != splitErr {
			t.Fatalf("error %q whole, %q split", wholeErr, splitErr)
		}
		if wholeErr == "" && !bytes.Equal(whole.out, split.out) {
			t.Fatalf("out %q whole, %q split", whole.out, split.out)
		}
	})
}

// FuzzBridge sends arbitrary bytes to a real node and bridge on loopback,
// one connection per input: nothing may crash, and a fresh connection must
// still be answered.
func FuzzBridge(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	addr, _ := startBridge(f, nil, func(c *Config) {
		c.RequestTimeout = 2 * time.Second
		c.MaxArgs, c.MaxBulkLen = 16, 1024
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(data); err != nil {
			return // the server closed on an earlier part
		}
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c) // until the server closes or the deadline
		p, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		_ = p.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 7)
		if _, err := p.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(p, buf); err != nil || string(buf) != "+PONG\r\n" {
			t.Fatalf("PING after %q: %q, %v", data, buf, err)
		}
	})
}

var fuzzSeeds = []string{
	"*1\r\n$4\r\nPING\r\n",
	"PING\r\n",
	"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
	"*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n5000\r\n",
	"*4\r\n$13\r\nFENCE.ACQUIRE\r\n$1\r\na\r\n$2\r\nme\r\n$4\r\n1000\r\n",
	"*1\r\n$9223372036854775800\r\nxx\r\n",
	"*99999999999\r\n",
	"*1\r\n$-2\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
	"*2\r\n$4\r\nECHO\r\n$2000\r\n",
	"\"unbalanced\r\n",
	"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n",
}
