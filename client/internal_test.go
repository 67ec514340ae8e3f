package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/wire"
)

// replyErr is an error reply as go-redis returns it.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// An invalid-argument reply names its argument (the wait loop shortens its
// rounds on "wait"); any other ERR names none.
func TestClassifyNamesTheArgument(t *testing.T) {
	for reply, arg := range map[string]string{
		wire.FormatInvalidArgument("wait", "1h0m0s is outside 0s..1m0s").String(): "wait",
		"ERR invalid argument: ttl: 50ms is outside 100ms..24h0m0s":               "ttl",
		"ERR invalid argument wait 1h":                                            "",
		"ERR wrong number of arguments for 'fence.acquire' command":               "",
	} {
		f := classify(replyErr(reply))
		if f.arg != arg || !errors.Is(f.err, ErrInvalidArgument) {
			t.Errorf("classify(%q) = arg %q, err %v; want arg %q and ErrInvalidArgument", reply, f.arg, f.err, arg)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err       error
		transient bool
		leader    string
		is        error
	}{
		{replyErr("UNCERTAIN outcome unknown: leadership lost while the command was in flight; retry it with the same owner"), true, "", nil},
		{replyErr("NOLEADER no leader is available; retry later"), true, "", nil},
		{replyErr(wire.FormatNotLeader("node-1", "127.0.0.1:7379").String()), true, "127.0.0.1:7379", nil},
		{replyErr("NOTLEADER node-1 127.0.0.1:7379 not the leader: send commands to the leader"), true, "127.0.0.1:7379", nil},
		{replyErr("NOTLEADER node-1 - not the leader, and the leader's client address is not known yet: retry later"), true, "", nil},
		{replyErr("NOTLEADER - - not the leader, and no leader is known: retry later"), true, "", nil},
		{replyErr("NOTLEADER not the leader; leader is node-1 at 127.0.0.1:7379"), true, "", nil}, // no fields: no leader learnt
		{replyErr("SHUTDOWN the server is shutting down"), true, "", nil},
		{replyErr("TIMEOUT the request timed out before it took effect; retry later"), true, "", nil},
		{replyErr("NOSCRIPT No matching script. Please use EVAL."), false, "", nil},
		{replyErr("ERR invalid argument: ttl: 50ms is outside 100ms..24h0m0s"), false, "", ErrInvalidArgument},
		{replyErr("ERR wrong number of arguments for 'fence.acquire' command"), false, "", ErrInvalidArgument},
		{replyErr("WRONGTYPE something else"), false, "", nil},
		{replyErr("LEASELOST lease lost: o held only some of the keys an earlier attempt was granted (the others ran out or were taken); the rest are released"), false, "", ErrLeaseLost},
		{replyErr("RELEASED this value released the key: it holds no lock on it and cannot write it or act on it again; nothing was done"), false, "", ErrValueReleased},
		{replyErr("WRONGPASS invalid username-password pair or user is disabled."), false, "", ErrAuth},
		{replyErr("NOAUTH Authentication required."), false, "", ErrAuth},
		{replyErr("NOPERM No permissions to access a key"), false, "", ErrNoPerm},
		{replyErr("NOPERM User alice has no permissions to run the 'fence.snapshot' command"), false, "", ErrNoPerm},
		{fmt.Errorf("failed to authenticate: %w", replyErr("WRONGPASS invalid username-password pair or user is disabled.")), false, "", ErrAuth},
		{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false, "", ErrTLS},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, false, "", ErrTLS},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, false, "", ErrTLS},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true, "", nil},
		{io.EOF, true, "", nil},
		{fmt.Errorf("dial tcp 127.0.0.1:1: connect: connection refused"), true, "", nil},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			f := classify(tc.err)
			if f.transient != tc.transient || f.leader != tc.leader {
				t.Errorf("classify = transient %v leader %q, want %v %q", f.transient, f.leader, tc.transient, tc.leader)
			}
			if tc.is != nil && !errors.Is(f.err, tc.is) {
				t.Errorf("classify(%v).err = %v, want it to wrap %v", tc.err, f.err, tc.is)
			}
			if !tc.transient && f.err == nil {
				t.Error("a permanent failure has no error")
			}
		})
	}
}

func TestRoundLength(t *testing.T) {
	for _, tc := range []struct{ ttl, want time.Duration }{
		{100 * time.Millisecond, 50 * time.Millisecond},
		{8 * time.Second, 4 * time.Second},
		{time.Hour, maxRound},
		{time.Microsecond, time.Millisecond},
	} {
		if got := roundLength(tc.ttl); got != tc.want {
			t.Errorf("roundLength(%v) = %v, want %v", tc.ttl, got, tc.want)
		}
	}
}

func TestAllowance(t *testing.T) {
	if got, want := allowance(8*time.Second, 0.01), 82*time.Millisecond; got != want {
		t.Errorf("allowance(8s, 0.01) = %v, want %v", got, want)
	}
	if got, want := allowance(time.Second, 0), 2*time.Millisecond; got != want {
		t.Errorf("allowance(1s, 0) = %v, want %v", got, want)
	}
}

func TestParseGrant(t *testing.T) {
	sent := time.Now()
	for _, tc := range []struct {
		name    string
		reply   any
		granted bool
		bad     bool
		want    grant
	}{
		{"null", nil, false, false, grant{}},
		{"granted", []any{int64(42), int64(8000)}, true, false, grant{token: 42, ttl: 8 * time.Second, sent: sent}},
		{"shorter ttl granted", []any{int64(42), int64(5000)}, true, false, grant{token: 42, ttl: 5 * time.Second, sent: sent}},
		{"longer ttl granted counts as asked", []any{int64(42), int64(9000)}, true, false, grant{token: 42, ttl: 8 * time.Second, sent: sent}},
		{"not an array", "OK", false, true, grant{}},
		{"short array", []any{int64(1)}, false, true, grant{}},
		{"zero token", []any{int64(0), int64(8000)}, false, true, grant{}},
		{"strings", []any{"1", "8000"}, false, true, grant{}},
		{"zero ttl outside a session", []any{int64(42), int64(0)}, false, true, grant{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, granted, err := parseGrant(tc.reply, lockReq{name: "k", owner: "o", ttl: 8 * time.Second}, sent)
			if (err != nil) != tc.bad || granted != tc.granted || g != tc.want {
				t.Errorf("parseGrant(%v) = %+v, %v, %v; want %+v, %v, error %v", tc.reply, g, granted, err, tc.want, tc.granted, tc.bad)
			}
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs []string
		opts  []Option
	}{
		{"no addresses", nil, nil},
		{"no port", []string{"127.0.0.1"}, nil},
		{"zero request timeout", []string{"127.0.0.1:7379"}, []Option{WithRequestTimeout(0)}},
		{"negative failover timeout", []string{"127.0.0.1:7379"}, []Option{WithFailoverTimeout(-time.Second)}},
		{"drift factor too large", []string{"127.0.0.1:7379"}, []Option{WithDrift(0.5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.addrs, tc.opts...)
			if !errors.Is(err, ErrInvalidArgument) {
				if c != nil {
					c.Close()
				}
				t.Fatalf("New = %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func TestNewDefaultsAndDuplicates(t *testing.T) {
	c, err := New([]string{"127.0.0.1:7379", "127.0.0.1:7479", "127.0.0.1:7379"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Addrs(); len(got) != 2 || got[0] != "127.0.0.1:7379" || got[1] != "127.0.0.1:7479" {
		t.Errorf("Addrs = %v, want the two distinct addresses in order", got)
	}
	if c.cfg.requestTimeout != 5*time.Second || c.cfg.failoverTimeout != 15*time.Second || c.cfg.drift != 0.01 {
		t.Errorf("defaults = %+v", c.cfg)
	}
	m := c.NewMutex("m")
	if m.expiry != 8*time.Second || m.tries != 32 || m.retryDelay != 250*time.Millisecond {
		t.Errorf("mutex defaults: expiry %v tries %d delay %v", m.expiry, m.tries, m.retryDelay)
	}
}

// failed moves to the leader a node names, else to the next address, and
// only once for one failure seen by several requests.
func TestFailedMovesOn(t *testing.T) {
	c, err := New([]string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n0, n1, n2 := c.nodes[0], c.nodes[1], c.nodes[2]
	c.failed(n0, "")
	if c.cur != 1 {
		t.Fatalf("after a failure of node 0, current = %d, want 1", c.cur)
	}
	c.failed(n0, "") // a second request that failed on node 0
	if c.cur != 1 {
		t.Fatalf("a stale failure moved the client to %d", c.cur)
	}
	c.failed(n1, "127.0.0.1:1")
	if c.cur != 0 {
		t.Fatalf("after node 1 named node 0 as leader, current = %d, want 0", c.cur)
	}
	c.failed(n0, "10.9.9.9:7379") // a leader the client does not know
	if c.cur != 1 {
		t.Fatalf("current = %d, want 1", c.cur)
	}
	_ = n2
}

func TestMutexBudget(t *testing.T) {
	for _, tc := range []struct {
		tries int
		delay time.Duration
		want  time.Duration
	}{
		{32, 250 * time.Millisecond, 31 * 250 * time.Millisecond},
		{1, time.Second, 0},
		{0, time.Second, 0},
		{5, 0, 0},
		{math.MaxInt, time.Hour, math.MaxInt64},
	} {
		m := &Mutex{tries: tc.tries, retryDelay: tc.delay}
		if got := m.budget(); got != tc.want {
			t.Errorf("budget(%d tries, %v) = %v, want %v", tc.tries, tc.delay, got, tc.want)
		}
	}
}

// The client must not depend on the server's packages (DESIGN.md): a user
// who imports it gets go-redis, not Raft.
func TestImportsNoServerPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/fencerlock/fencer/server", "github.com/fencerlock/fencer/fsm",
			"github.com/fencerlock/fencer/redisbridge", "github.com/hashicorp/raft"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("package client depends on %s", dep)
			}
		}
	}
}
