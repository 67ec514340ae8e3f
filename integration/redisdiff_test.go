package integration

import (
	"bufio"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/redisdiff"
	"github.com/fencerlock/fencer/internal/redistest"
	"github.com/fencerlock/fencer/internal/resp"
)

// The differential tests, live: every case of testdata/redisdiff/cases (the
// format: package internal/redisdiff) is sent, a command at a time, to a
// real redis-server and to fencer (one node, and a three-node cluster
// through a follower), both at once, and the replies are compared one by
// one. go test ./rediscompat compares fencer with Redis's replies recorded
// from the same cases, offline.

const redisdiffDir = "testdata/redisdiff"

// runDiffCases runs every case against redis and fencer at fencerAddr and
// reports each step whose replies differ.
func runDiffCases(t *testing.T, redisAddr, fencerAddr string) {
	cases, err := redisdiff.Load(redisdiffDir)
	if err != nil {
		t.Fatal(err)
	}
	compared, listed := 0, 0
	for _, c := range cases {
		t.Run(c.File+"/"+c.Name, func(t *testing.T) {
			var want, got map[int][]byte
			var rerr, ferr error
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); want, rerr = redisdiff.Play(c, redisAddr) }()
			go func() { defer wg.Done(); got, ferr = redisdiff.Play(c, fencerAddr) }()
			wg.Wait()
			if rerr != nil || ferr != nil {
				t.Fatalf("redis %v, fencer %v", rerr, ferr)
			}
			res := redisdiff.Compare(c, want, got)
			for _, d := range res.Diffs {
				t.Error(d)
			}
			for _, n := range res.Notes {
				t.Log(n)
			}
			compared += res.Compared
			listed += res.Listed
		})
	}
	t.Logf("%d cases, %d replies equal, %d listed differences", len(cases), compared, listed)
}

func TestRedisDiffOneNode(t *testing.T) {
	runDiffCases(t, redistest.Start(t).Addr, startFencerd(t).addr)
}

func TestRedisDiffThroughAFollower(t *testing.T) {
	redisAddr := redistest.Start(t).Addr
	c := startNodeCluster(t, 3)
	follower := c.others(c.leader(t))[0]
	runDiffCases(t, redisAddr, c.nodes[follower].addr)
}

// diffConn is one connection that sends a command and reads its reply.
type diffConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialDiff(t *testing.T, addr string) *diffConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &diffConn{c: c, r: bufio.NewReader(c)}
}

func (dc *diffConn) do(args ...string) (resp.Value, error) {
	if err := dc.c.SetDeadline(time.Now().Add(requestTimeout)); err != nil {
		return resp.Value{}, err
	}
	if _, err := dc.c.Write(resp.Command(args...)); err != nil {
		return resp.Value{}, err
	}
	return resp.ReadValue(dc.r)
}
