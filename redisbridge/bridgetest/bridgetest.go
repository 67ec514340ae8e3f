// Package bridgetest runs a real one-node fencer in-process for the tests
// of the packages that talk to one (client, cmd/fencer, rediscompat's
// recorded replies): server.Node, with Raft and its log store in a
// temporary directory, and the RESP bridge on a loopback port. It starts
// from TestMain as well as from a test, so it reports errors rather than
// failing a test. It sits above the bridge it starts, as net/http/httptest
// does above net/http.
package bridgetest

import (
	"io"
	"log/slog"
	"net"
	"os"
	"sync"

	"github.com/fencerlock/fencer/redisbridge"
	"github.com/fencerlock/fencer/server"
)

// Node is a running node and its bridge.
type Node struct {
	// Addr is the bridge's address, which the node also advertises.
	Addr   string
	node   *server.Node
	bridge *redisbridge.Bridge
	dir    string
	once   sync.Once
}

// Start starts a node whose configuration, and its bridge's, nodeEdit and
// bridgeEdit change where they are not nil. It returns once the bridge
// listens; the node may not have elected itself yet, so a caller that times
// requests waits for a first reply through the client it tests.
func Start(nodeEdit func(*server.Config), bridgeEdit func(*redisbridge.Config)) (*Node, error) {
	dir, err := os.MkdirTemp("", "fencer-bridgetest-")
	if err != nil {
		return nil, err
	}
	n := &Node{dir: dir}
	if err := n.start(nodeEdit, bridgeEdit); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) start(nodeEdit func(*server.Config), bridgeEdit func(*redisbridge.Config)) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	n.Addr = ln.Addr().String()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.RaftAddr, cfg.ClientAddr = n.dir, "127.0.0.1:0", n.Addr
	cfg.RaftLogLevel, cfg.Logger = "off", quiet
	if nodeEdit != nil {
		nodeEdit(&cfg)
	}
	if n.node, err = server.Open(cfg); err != nil {
		ln.Close()
		return err
	}
	bcfg := redisbridge.DefaultConfig()
	bcfg.Logger = quiet
	if bridgeEdit != nil {
		bridgeEdit(&bcfg)
	}
	if n.bridge, err = redisbridge.New(n.node, bcfg); err != nil {
		ln.Close()
		return err
	}
	go func() { _ = n.bridge.Serve(ln) }()
	return nil
}

// Close stops the bridge and the node and removes the data directory. It
// may be called more than once.
func (n *Node) Close() {
	n.once.Do(func() {
		if n.bridge != nil {
			_ = n.bridge.Close()
		}
		if n.node != nil {
			_ = n.node.Close()
		}
		_ = os.RemoveAll(n.dir)
	})
}
