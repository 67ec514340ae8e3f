package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/redisbridge"
	"github.com/fencerlock/fencer/server"
)

// addrs holds the client address of the fencer node the examples and tests
// talk to: a real single-node server started in-process by TestMain, with
// Raft, its bolt store and the RESP bridge on loopback.
var addrs []string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	stop, addr, err := startNode(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client tests: starting a fencer node:", err)
		return 1
	}
	defer stop()
	addrs = []string{addr}
	return m.Run()
}

// startNode starts a one-node cluster in a temporary directory, with
// mod applied to its configuration if not nil, and waits until it grants
// locks.
func startNode(mod func(*server.Config)) (stop func(), addr string, err error) {
	return startBridgedNode(mod, nil)
}

// startBridgedNode is startNode with bmod, if not nil, applied to the
// configuration of the node's RESP bridge too (authentication, TLS), and
// warm the client options that get through it. stop may be called more
// than once.
func startBridgedNode(mod func(*server.Config), bmod func(*redisbridge.Config), warm ...client.Option) (stop func(), addr string, err error) {
	dir, err := os.MkdirTemp("", "fencer-client-test-")
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.RaftAddr, cfg.ClientAddr = dir, "127.0.0.1:0", ln.Addr().String()
	cfg.RaftLogLevel, cfg.Logger = "off", quiet
	if mod != nil {
		mod(&cfg)
	}
	node, err := server.Open(cfg)
	if err != nil {
		ln.Close()
		os.RemoveAll(dir)
		return nil, "", err
	}
	bcfg := redisbridge.DefaultConfig()
	bcfg.Logger = quiet
	if bmod != nil {
		bmod(&bcfg)
	}
	bridge, err := redisbridge.New(node, bcfg)
	if err != nil {
		ln.Close()
		node.Close()
		os.RemoveAll(dir)
		return nil, "", err
	}
	go func() { _ = bridge.Serve(ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			bridge.Close()
			node.Close()
			os.RemoveAll(dir)
		})
	}
	// The first lock command waits for the node to elect itself; wait here
	// so that no test pays for it.
	c, err := client.New([]string{ln.Addr().String()}, append([]client.Option{client.WithFailoverTimeout(30 * time.Second)}, warm...)...)
	if err != nil {
		stop()
		return nil, "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := c.Status(ctx, "warm-up"); err != nil {
		stop()
		return nil, "", err
	}
	return stop, ln.Addr().String(), nil
}
