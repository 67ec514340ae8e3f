package redisbridge

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultyLocker fails every call with err. It stands in for the node only
// because a real node cannot lose leadership mid-commit, or time out with an
// entry in flight, on demand; the reply mapping is what is under test.
type faultyLocker struct{ err error }

func (f faultyLocker) Acquire(context.Context, string, string, time.Duration, time.Duration) (server.Grant, bool, error) {
	return server.Grant{}, false, f.err
}
func (f faultyLocker) Extend(context.Context, string, string, time.Duration) (bool, error) {
	return false, f.err
}
func (f faultyLocker) Release(context.Context, string, string) (bool, error) { return false, f.err }
func (f faultyLocker) Revoke(context.Context, string) (bool, error)          { return false, f.err }
func (f faultyLocker) Status(context.Context, string) (server.Status, bool, error) {
	return server.Status{}, false, f.err
}
func (f faultyLocker) Check(context.Context, string, uint64) (bool, error) { return false, f.err }
func (f faultyLocker) Leader() (string, string)                            { return "", "" }

func TestServerErrorsHaveDistinctReplies(t *testing.T) {
	cases := []struct {
		err    error
		prefix string
	}{
		{fmt.Errorf("%w: leadership lost while the command was in flight", server.ErrUnknownOutcome), "UNCERTAIN "},
		{fmt.Errorf("%w: %v", server.ErrUnknownOutcome, context.DeadlineExceeded), "UNCERTAIN "},
		{server.ErrNoLeader, "NOLEADER "},
		{&server.NotLeaderError{Leader: "n2"}, "NOTLEADER "},
		{server.ErrShutdown, "SHUTDOWN "},
	}
	for _, tc := range cases {
		t.Run(tc.prefix, func(t *testing.T) {
			b, err := New(faultyLocker{tc.err}, Config{RequestTimeout: time.Second, Logger: quiet})
			require.NoError(t, err)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			go func() { _ = b.Serve(ln) }()
			defer b.Close()
			c := newClient(t, ln.Addr().String())
			for _, args := range [][]any{
				{"FENCE.ACQUIRE", "k", "o", 1000},
				{"FENCE.EXTEND", "k", "o", 1000},
				{"FENCE.RELEASE", "k", "o"},
				{"FENCE.STATUS", "k"},
				{"FENCE.CHECK", "k", 1},
				{"SET", "k", "v", "NX", "PX", 1000},
				{"SETNX", "k", "v"},
				{"GET", "k"},
				{"DEL", "k"},
				{"PEXPIRE", "k", 1000},
				{"EVAL", redsyncDelete412, 1, "k", "v"},
				{"EVAL", redsyncTouchSetNX, 1, "k", "v", 1000},
				{"EVAL", redlockAcquire5, 2, "k", "k2", "v", 1000},
				{"EVAL", redisPyExtend35, 1, "k", "v", 1000, "0"},
				{"EVAL", redissonLock319, 1, "k", 30000, "o:1"},
				{"EVAL", redissonUnlock324, 3, "k", "ch", "latch", 0, 30000, "o:1", "publish", 7500},
			} {
				_, err := do(t, c, args...)
				require.Error(t, err, "%v", args)
				assert.Regexp(t, "^"+tc.prefix, err.Error(), "%v: never a null or 0 for an unknown outcome", args)
			}
		})
	}
}

func (f faultyLocker) Members(context.Context) ([]server.Member, error)   { return nil, f.err }
func (f faultyLocker) Join(context.Context, string, string, string) error { return f.err }
func (f faultyLocker) Remove(context.Context, string) error               { return f.err }
func (f faultyLocker) TransferLeadership(context.Context, string) error   { return f.err }
func (f faultyLocker) AcquireRedis(context.Context, string, string, time.Duration) (server.Grant, bool, error) {
	return server.Grant{}, false, f.err
}
func (f faultyLocker) ExtendHolder(context.Context, string, time.Duration) (bool, error) {
	return false, f.err
}
func (f faultyLocker) ReleaseRedis(context.Context, string, string) (bool, error) {
	return false, f.err
}
func (f faultyLocker) ID() string { return "faulty" }
