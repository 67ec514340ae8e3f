package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/fencerlock/fencer/redisbridge"
	"github.com/fencerlock/fencer/server"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parse returns the config the flags in args set.
func parse(t *testing.T, args ...string) *config {
	t.Helper()
	c := defaultConfig()
	cmd := &cobra.Command{}
	c.bindFlags(cmd)
	require.NoError(t, cmd.ParseFlags(args))
	return c
}

// Without flags, the configs are their packages' defaults, but for the
// addresses fencerd derives from --listen.
func TestFlagDefaultsAreTheConfigDefaults(t *testing.T) {
	c := parse(t)
	node := server.DefaultConfig()
	assert.Equal(t, node.ClientAddr, c.listen)
	node.ClientAddr, node.RaftAddr, node.DataDir = "", "", "./"+node.DataDir
	assert.Equal(t, node, c.node)
	assert.Equal(t, redisbridge.DefaultConfig(), c.bridge)

	c = parse(t, "--max-ttl", "1h", "--max-args", "7", "--advertise", "10.0.0.1:7379", "--join", "a:1,b:2")
	assert.Equal(t, time.Hour, c.node.MaxTTL)
	assert.Equal(t, 7, c.bridge.MaxArgs)
	assert.Equal(t, "10.0.0.1:7379", c.node.ClientAddr)
	assert.Equal(t, []string{"a:1", "b:2"}, c.join)
}

// Every field of the hint table is a config field, set by a flag that
// exists.
func TestFlagOfNamesRealFieldsAndFlags(t *testing.T) {
	flags := newCommand().Flags()
	for field, flag := range flagOf {
		_, inNode := reflect.TypeFor[server.Config]().FieldByName(field)
		_, inBridge := reflect.TypeFor[redisbridge.Config]().FieldByName(field)
		assert.True(t, inNode || inBridge, "%s is no field of server.Config or redisbridge.Config", field)
		assert.NotNil(t, flags.Lookup(flag[2:]), "%s: no flag %s", field, flag)
	}
}

// A bad value is reported with the flag that sets it, every bad value at
// once.
func TestValidateNamesTheFlags(t *testing.T) {
	c := parse(t, "--max-args", "0", "--min-ttl", "0", "--raft-log-level", "loud")
	c.node.ClientAddr, c.node.RaftAddr = "127.0.0.1:7379", "127.0.0.1:7380"
	err := c.validate()
	require.Error(t, err)
	for _, want := range []string{"redisbridge: config MaxArgs", "server: config MinTTL", "server: config RaftLogLevel",
		"(set with --min-ttl, --raft-log-level, --max-args)"} {
		assert.ErrorContains(t, err, want)
	}

	c = parse(t, "--default-lock-ttl", "25h")
	c.node.ClientAddr, c.node.RaftAddr = "127.0.0.1:7379", "127.0.0.1:7380"
	assert.EqualError(t, c.validate(), "server: config DefaultLockTTL: 25h0m0s is outside MinTTL 100ms .. MaxTTL 24h0m0s\n(set with --default-lock-ttl)")
	c.node.MaxTTL = 48 * time.Hour
	assert.NoError(t, c.validate())
}

func TestCleanupRunsInReverseOnce(t *testing.T) {
	var cl cleanup
	var got []int
	for i := range 3 {
		cl.push(func() { got = append(got, i) })
	}
	cl.run()
	cl.run()
	assert.Equal(t, []int{2, 1, 0}, got)
}

// run refuses a bad flag before it opens the node, and leaves nothing
// open or written.
func TestRunRefusesBadFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := parse(t, "--listen", "127.0.0.1:0", "--raft-listen", "127.0.0.1:0", "--http-listen", "off",
		"--data-dir", dir, "--max-clients", "-1", "--log-level", "error")
	err := run(t.Context(), c)
	assert.ErrorContains(t, err, "redisbridge: config MaxClients: must be positive, got -1\n(set with --max-clients)")
	_, statErr := os.Stat(dir)
	assert.ErrorIs(t, statErr, os.ErrNotExist, "the data directory is not touched")

	c = parse(t, "--log-level", "loud")
	assert.ErrorContains(t, run(t.Context(), c), "--log-level")
	c = parse(t, "--restore", "x", "--join", "127.0.0.1:1")
	assert.ErrorContains(t, run(t.Context(), c), "--restore starts a new cluster")
}

// run serves a one-node cluster until its context ends, then closes
// everything it opened.
func TestRunServesAndShutsDown(t *testing.T) {
	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := free.Addr().String()
	require.NoError(t, free.Close())
	c := parse(t, "--listen", addr, "--raft-listen", "127.0.0.1:0", "--http-listen", "off",
		"--data-dir", t.TempDir(), "--log-level", "error", "--raft-log-level", "off")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, c) }()

	ping := func() string {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return ""
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		if _, err := conn.Write([]byte("PING\r\n")); err != nil {
			return ""
		}
		line, _ := bufio.NewReader(conn).ReadString('\n')
		return line
	}
	require.Eventually(t, func() bool { return ping() == "+PONG\r\n" }, 20*time.Second, 50*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	_, err = net.DialTimeout("tcp", addr, time.Second)
	assert.Error(t, err, "the RESP port is closed")
}

// --min-ttl and --max-ttl bound the native leases, the sessions and
// --default-lock-ttl, not the TTL a Redis command asks for (which keeps
// Redis's range: shortening it would hand a lock on while its holder
// works); their help says so. (issue 31, item 6)
func TestTTLFlagsSayWhatTheyBound(t *testing.T) {
	cmd := &cobra.Command{}
	defaultConfig().bindFlags(cmd)
	for _, name := range []string{"min-ttl", "max-ttl"} {
		usage := cmd.Flags().Lookup(name).Usage
		for _, want := range []string{"FENCE.", "session", "--default-lock-ttl", "not the TTL of a Redis command"} {
			assert.Contains(t, usage, want, "--%s", name)
		}
	}
}
