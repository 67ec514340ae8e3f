package main

import (
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAddrBeside(t *testing.T) {
	for _, c := range []struct {
		listen, want string
		ok           bool
	}{
		{"127.0.0.1:7379", "127.0.0.1:7381", true},
		{"[::1]:7479", "[::1]:7481", true},
		{"0.0.0.0:65533", "0.0.0.0:65535", true},
		{"127.0.0.1:65534", "", false},
		{"127.0.0.1:0", "", false},
		{"nonsense", "", false},
	} {
		got, err := addrBeside(c.listen, 2, "--http-listen")
		if !c.ok {
			assert.Error(t, err, c.listen)
			continue
		}
		require.NoError(t, err, c.listen)
		assert.Equal(t, c.want, got)
	}
}

func TestListenHTTP(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ln, err := listenHTTP("off", "127.0.0.1:7379", quiet)
	require.NoError(t, err)
	assert.Nil(t, ln)

	// A busy port: the derived default is skipped, an explicit one fails.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	ln, err = listenHTTP("", net.JoinHostPort("127.0.0.1", strconv.Itoa(port-2)), quiet)
	require.NoError(t, err)
	assert.Nil(t, ln)
	_, err = listenHTTP(busy.Addr().String(), "", quiet)
	assert.ErrorContains(t, err, "--http-listen")

	ln, err = listenHTTP("127.0.0.1:0", "", quiet)
	require.NoError(t, err)
	require.NotNil(t, ln)
	require.NoError(t, ln.Close())
}

// An explicit --http-listen that cannot be bound or parsed stops fencerd
// with an error naming the flag (it panicked in the clean-up of the RESP
// listener: a closure over the named result the error return set to nil).
func TestHTTPListenErrorsNameTheFlag(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	for _, addr := range []string{busy.Addr().String(), "not-an-address", "127.0.0.1:99999"} {
		t.Run(addr, func(t *testing.T) {
			cmd := newCommand()
			cmd.SetArgs([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
				"--raft-listen", "127.0.0.1:0", "--http-listen", addr})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.Execute()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "--http-listen")
		})
	}
}
