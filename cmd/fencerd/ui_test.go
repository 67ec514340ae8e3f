package main

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/fencerlock/fencer/redisbridge"
	"github.com/stretchr/testify/assert"
)

func TestCheckUI(t *testing.T) {
	withPass := redisbridge.Config{RequirePass: "p"}
	withUsers := redisbridge.Config{Users: []redisbridge.User{redisbridge.NewUser("a", "b", "*")}}
	certs := &certStore{}
	for _, tc := range []struct {
		addr      string
		protected bool
		cfg       redisbridge.Config
		certs     *certStore
		want      string // "" for accepted
	}{
		{"", true, redisbridge.Config{}, nil, ""},
		{"127.0.0.1:7382", true, withPass, nil, ""},
		{"[::1]:7382", true, withUsers, nil, ""},
		{"localhost:7382", true, withUsers, nil, ""},
		{"127.0.0.1:7382", true, redisbridge.Config{}, nil, "--ui needs --users or --requirepass"},
		{"10.0.0.5:7382", false, redisbridge.Config{}, certs, "--ui needs --users or --requirepass"},
		{"0.0.0.0:7382", true, withPass, nil, "protected mode"},
		{":7382", true, withPass, nil, "protected mode"},
		{"10.0.0.5:7382", true, withUsers, nil, "protected mode"},
		{"10.0.0.5:7382", false, withUsers, nil, ""},
		{"0.0.0.0:7382", true, withPass, certs, ""},
	} {
		err := checkUI(tc.addr, tc.protected, tc.cfg, tc.certs)
		if tc.want == "" {
			assert.NoError(t, err, "%+v", tc)
		} else {
			assert.ErrorContains(t, err, tc.want, "%+v", tc)
		}
	}
}

func TestUIConnectionLimit(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &limitedListener{Listener: inner, slots: make(chan struct{}, 2)}
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1, c2, c3 := dial(), dial(), dial()
	defer c1.Close()
	defer c2.Close()
	s1, s2 := <-accepted, <-accepted
	// The third is closed by the listener: a read ends at once.
	_ = c3.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c3.Read(make([]byte, 1))
	assert.Error(t, err)
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "closed, not left waiting")
	// A slot given back takes the next one.
	s1.Close()
	s1.Close() // twice gives back one slot
	c4 := dial()
	defer c4.Close()
	select {
	case s4 := <-accepted:
		s4.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot was not reused")
	}
	s2.Close()
}
