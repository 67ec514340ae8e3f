package client_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/redisbridge"
	"github.com/fencerlock/fencer/redisbridge/bridgetest"
	"github.com/fencerlock/fencer/server"
)

// addrs holds the client address of the fencer node the examples and tests
// talk to: a real single-node server started in-process by TestMain, with
// Raft, its log store and the RESP bridge on loopback (bridgetest).
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
	n, err := bridgetest.Start(mod, bmod)
	if err != nil {
		return nil, "", err
	}
	stop = n.Close
	// The first lock command waits for the node to elect itself; wait here
	// so that no test pays for it.
	c, err := client.New([]string{n.Addr}, append([]client.Option{client.WithFailoverTimeout(30 * time.Second)}, warm...)...)
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
	return stop, n.Addr, nil
}
