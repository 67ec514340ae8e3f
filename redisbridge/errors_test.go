package redisbridge

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/redis/go-redis/v9"
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
func (f faultyLocker) Leader() (string, string) { return "", "" }

// serveLocker serves a bridge over l on a loopback port until the test ends
// and returns a client of it.
func serveLocker(t *testing.T, l Locker, cfg Config) *redis.Client {
	t.Helper()
	b, err := New(l, cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.Serve(ln) }()
	t.Cleanup(func() { _ = b.Close() })
	return newClient(t, ln.Addr().String())
}

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
		{fmt.Errorf("%w: its keys changed under it 16 times", server.ErrConflict), "TIMEOUT "},
	}
	for _, tc := range cases {
		t.Run(tc.prefix, func(t *testing.T) {
			c := serveLocker(t, faultyLocker{tc.err}, quietConfig(time.Second))
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
				{"EXISTS", "k", "k2"},
				{"HGET", "k", "o:1"},
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

func (f faultyLocker) Members(context.Context) ([]server.Member, error)      { return nil, f.err }
func (f faultyLocker) KnownMembers(context.Context) ([]server.Member, error) { return nil, f.err }
func (f faultyLocker) Join(context.Context, string, string, string) error    { return f.err }
func (f faultyLocker) Remove(context.Context, string) error                  { return f.err }
func (f faultyLocker) TransferLeadership(context.Context, string) error      { return f.err }
func (f faultyLocker) AcquireRedis(context.Context, string, string, time.Duration) (server.Grant, bool, error) {
	return server.Grant{}, false, f.err
}
func (f faultyLocker) Update(context.Context, []string, func(*server.Tx) error) error { return f.err }
func (f faultyLocker) ID() string                                                     { return "faulty" }

// unsureLocker's first acquire ends with an unknown outcome; each later one
// waits for its context to end and fails with the context's error, as the
// node does for a command withdrawn from its queue. A stand-in because a
// real node cannot lose leadership mid-commit on demand.
type unsureLocker struct {
	faultyLocker
	mu    sync.Mutex
	calls int
}

func (u *unsureLocker) Acquire(ctx context.Context, _, _ string, _, _ time.Duration) (server.Grant, bool, error) {
	u.mu.Lock()
	u.calls++
	first := u.calls == 1
	u.mu.Unlock()
	if first {
		return server.Grant{}, false, fmt.Errorf("%w: leadership lost while the command was in flight", server.ErrUnknownOutcome)
	}
	<-ctx.Done()
	return server.Grant{}, false, ctx.Err()
}

// A waiting acquire whose earlier attempt may have been granted ends in
// UNCERTAIN when a later attempt runs out of time, not in TIMEOUT.
func TestWaitKeepsAnEarlierUnknownOutcome(t *testing.T) {
	l := &unsureLocker{faultyLocker: faultyLocker{server.ErrShutdown}}
	c := serveLocker(t, l, quietConfig(100*time.Millisecond))
	_, err := do(t, c, "FENCE.ACQUIRE", "k", "o", 1000, "WAIT", 1000)
	require.Error(t, err)
	assert.Regexp(t, "^UNCERTAIN ", err.Error())
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, 2, l.calls, "a second attempt ran")
}
