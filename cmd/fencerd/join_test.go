package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/redcon"
)

// fakeMembers serves FENCE.MEMBERS on loopback: with no leader for the
// first noLeader calls, then with itself as the leader.
func fakeMembers(t *testing.T, noLeader int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	var calls atomic.Int64
	go func() {
		_ = redcon.Serve(ln, func(c redcon.Conn, cmd redcon.Command) {
			role := "leader"
			if calls.Add(1) <= noLeader {
				role = "follower"
			}
			c.WriteArray(1)
			c.WriteArray(4)
			for _, f := range []string{"n1", "127.0.0.1:1", addr, role} {
				c.WriteBulkString(f)
			}
		}, nil, nil)
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return addr
}

// A joiner that asks a cluster still electing its first leader logs that
// at INFO and goes on when the leader is known; a member that cannot be
// reached is a WARN.
func TestCheckNotMemberWhileTheClusterForms(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	dead := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		return ln.Addr().String()
	}()
	j := &joiner{addrs: []string{dead, fakeMembers(t, 2)}, self: "self", log: log}
	require.NoError(t, j.checkNotMember(ctx, "n9"))
	var infos, warns int
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		switch {
		case strings.Contains(l, "level=INFO") && strings.Contains(l, `err="no leader known"`):
			infos++
		case strings.Contains(l, "level=WARN") && strings.Contains(l, "via="+dead):
			warns++
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
	assert.Equal(t, 2, infos, "one INFO per round without a leader:\n%s", buf.String())
	assert.Equal(t, 3, warns, "the dead member warns every round:\n%s", buf.String())
}
