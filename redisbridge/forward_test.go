package redisbridge

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// movingLeader is a Locker that is never the leader and names a leader that
// changes at a set time. It is a stand-in because a real node cannot be made
// to name first a dead leader and then a stalled one on demand; what is under
// test is that the follower's forwarding keeps one deadline per request.
type movingLeader struct {
	faultyLocker
	switchAt      time.Time
	before, after string
}

func (m *movingLeader) Leader() (string, string) {
	if time.Now().Before(m.switchAt) {
		return "A", m.before
	}
	return "B", m.after
}

func (m *movingLeader) ID() string { return "follower" }

func TestForwardingKeepsOneDeadlinePerRequest(t *testing.T) {
	// A leader that cannot be reached: the test holds its port (a freed
	// port could be taken by any other process's listener, and a fencer
	// node there answers the forwarded command at once: NOTLEADER in
	// milliseconds, as seen in CI) and hangs up on every connection before
	// the forwarding handshake is answered.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer dead.Close()
	deadAddr := dead.Addr().String()
	go func() {
		for {
			c, err := dead.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	// A leader that accepts the forwarding handshake and then never answers.
	stall, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer stall.Close()
	go func() {
		for {
			c, err := stall.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				rd := bufio.NewReader(c)
				if _, err := resp.ReadRaw(rd); err != nil { // the forwarded command
					return
				}
				_, _ = c.Write([]byte("+OK\r\n"))
				_, _ = rd.ReadByte() // then silence until the peer gives up
				time.Sleep(10 * time.Second)
			}()
		}
	}()

	m := &movingLeader{switchAt: time.Now().Add(900 * time.Millisecond), before: deadAddr, after: stall.Addr().String()}
	m.err = &server.NotLeaderError{Leader: "A", LeaderAddr: deadAddr}
	c := serveLocker(t, m, quietConfig(time.Second))
	start := time.Now()
	_, err = do(t, c, "FENCE.ACQUIRE", "k", "o", 1000)
	took := time.Since(start)
	require.Error(t, err)
	assert.Regexp(t, "^UNCERTAIN ", err.Error(), "the stalled leader got the command")
	assert.Less(t, took, 1500*time.Millisecond, "one request, one --request-timeout (1s), even across a leader change")
}
