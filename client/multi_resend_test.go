package client_test

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/internal/resp"
)

// resendProxy relays connections to the node at addr, and steps into the
// first two FENCE.MACQUIRE commands: the first reaches the node, but its
// reply is replaced with UNCERTAIN (its answer lost); the second (the
// client's resend) is held until hold is closed.
type resendProxy struct {
	ln   net.Listener
	addr string
	hold chan struct{}

	mu   sync.Mutex
	seen int
}

func startResendProxy(t *testing.T, addr string) *resendProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &resendProxy{ln: ln, addr: addr, hold: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.relay(c)
		}
	}()
	return p
}

func (p *resendProxy) relay(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.addr)
	if err != nil {
		return
	}
	defer s.Close()
	lost := make(chan bool, 1024) // per command sent: is its reply lost?
	go func() {
		defer c.Close()
		r := bufio.NewReader(s)
		for {
			raw, err := resp.ReadRaw(r)
			if err != nil {
				return
			}
			if <-lost {
				raw = []byte("-UNCERTAIN outcome unknown: leadership lost while the command was in flight; retry it with the same owner\r\n")
			}
			if _, err := c.Write(raw); err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(c)
	for {
		raw, err := resp.ReadRaw(r)
		if err != nil {
			return
		}
		v, _ := resp.ReadValue(bufio.NewReader(bytes.NewReader(raw)))
		replaced := false
		if len(v.Elems) > 0 && strings.EqualFold(v.Elems[0].Str, "FENCE.MACQUIRE") {
			p.mu.Lock()
			p.seen++
			n := p.seen
			p.mu.Unlock()
			switch n {
			case 1:
				replaced = true
			case 2:
				<-p.hold
			}
		}
		lost <- replaced
		if _, err := s.Write(raw); err != nil {
			return
		}
	}
}

// AcquireAll whose first attempt was granted but answered UNCERTAIN, and
// whose resend finds one of the keys taken from it meanwhile, reports a
// lost lease: not "held by another", not an invalid request; and the key it
// still held is released. (issue 31, item 4)
func TestAcquireAllResendAfterPartialLoss(t *testing.T) {
	p := startResendProxy(t, addrs[0])
	c, err := client.New([]string{p.ln.Addr().String()}, client.WithFailoverTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		_, err := c.AcquireAll(ctxT(t, 30*time.Second), []string{"resend-1", "resend-2"}, client.WithTTL(time.Minute))
		done <- err
	}()
	raw := rawClient(t)
	// The first attempt was granted (its reply lost); take one key from it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := raw.Do(ctxT(t, 5*time.Second), "FENCE.REVOKE", "resend-2").Int()
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first attempt was never granted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(p.hold)
	err = <-done
	if !errors.Is(err, client.ErrLeaseLost) || errors.Is(err, client.ErrLocked) || errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("AcquireAll = %v, want a lost lease", err)
	}
	if v, err := raw.Do(ctxT(t, 5*time.Second), "FENCE.STATUS", "resend-1").Result(); err == nil && v != nil {
		t.Errorf("resend-1 is still held: %v", v)
	}
}
