package fenceredis_test

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/redistest"
	"github.com/fencerlock/fencer/internal/resp"
	"github.com/redis/go-redis/v9"
)

// client returns a go-redis client of s, closed when the test ends.
func client(t *testing.T, s *redistest.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// monitor records every command the server runs, Lua scripts' own calls
// included, in the order it runs them (MONITOR on a raw connection).
type monitor struct {
	conn  net.Conn
	lines chan string
}

func startMonitor(t *testing.T, s *redistest.Server) *monitor {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(resp.Command("MONITOR")); err != nil {
		t.Fatal(err)
	}
	m := &monitor{conn: c, lines: make(chan string, 1<<16)}
	// A line shows a command with all its arguments, a script sent with
	// EVAL included: more room than bufio's default.
	r := bufio.NewReaderSize(c, 1<<20)
	if v, err := resp.ReadValue(r); err != nil || v.Kind != resp.SimpleString || v.Str != "OK" {
		t.Fatalf("MONITOR answered %v, %v", v, err)
	}
	go func() {
		defer close(m.lines)
		for {
			v, err := resp.ReadValue(r)
			if err != nil || v.Kind != resp.SimpleString {
				return
			}
			m.lines <- v.Str
		}
	}()
	return m
}

// until returns the lines recorded up to the first one that contains mark
// (a command the test sends after the ones it wants to see).
func (m *monitor) until(t *testing.T, mark string) []string {
	t.Helper()
	var out []string
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-m.lines:
			if !ok {
				t.Fatal("MONITOR connection closed")
			}
			if strings.Contains(line, mark) {
				return out
			}
			out = append(out, line)
		case <-timeout:
			t.Fatalf("MONITOR did not show %q within 30s", mark)
		}
	}
}
