package client_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/redisbridge"
)

// Credentials of the nodes authNode starts: the user "default" of
// --requirepass, and a user limited to the locks "app:*" (as from a
// --users file).
const (
	testPassword  = "sekret"
	aliceUser     = "alice"
	alicePassword = "apw"
	alicePattern  = "app:*"
)

// secureNode starts a real one-node cluster whose RESP bridge bmod
// configures, stopped when the test ends, and returns its address and a
// function that stops it earlier. warm are the client options that get
// through to it.
func secureNode(t *testing.T, bmod func(*redisbridge.Config), warm ...client.Option) (addr string, stop func()) {
	t.Helper()
	stop, addr, err := startBridgedNode(nil, bmod, warm...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr, stop
}

// requireAuth is fencerd --requirepass sekret --users FILE, with alice in
// the file.
func requireAuth(c *redisbridge.Config) {
	c.RequirePass = testPassword
	c.Users = []redisbridge.User{redisbridge.NewUser(aliceUser, alicePassword, alicePattern)}
}

// authNode starts a node that requires authentication.
func authNode(t *testing.T) string {
	t.Helper()
	addr, _ := secureNode(t, requireAuth, client.WithAuth("", testPassword))
	return addr
}

// clientOf returns a client of addrs, closed when the test ends.
func clientOf(t *testing.T, addrs []string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// With the password of --requirepass (the user "default"), leases and
// mutexes work as without authentication.
func TestAuthWithPassword(t *testing.T) {
	t.Parallel()
	addr := authNode(t)
	c := clientOf(t, []string{addr}, client.WithAuth("", testPassword))

	l, err := c.TryAcquire(ctxT(t, 10*time.Second), "auth/lease", client.WithAutoRenew(), client.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("TryAcquire with the password: %v", err)
	}
	if l.Token() == 0 {
		t.Fatal("granted with token 0")
	}
	st, held, err := c.Status(ctxT(t, 10*time.Second), "auth/lease")
	if err != nil || !held || st.Owner != l.Owner() || st.Token != l.Token() {
		t.Fatalf("Status = %+v, %v, %v; want held by %q with token %d", st, held, err, l.Owner(), l.Token())
	}
	// Renewals authenticate too: the lease outlives its TTL.
	time.Sleep(1200 * time.Millisecond)
	if err := l.Err(); err != nil {
		t.Fatalf("auto-renewed lease ended: %v", err)
	}
	if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}

	m := c.NewMutex("auth/mutex", client.WithExpiry(5*time.Second))
	if err := m.LockContext(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Mutex.Lock with the password: %v", err)
	}
	if m.Token() <= l.Token() {
		t.Errorf("mutex token %d is not above the earlier lease's %d", m.Token(), l.Token())
	}
	if ok, err := m.ExtendContext(ctxT(t, 10*time.Second)); !ok || err != nil {
		t.Errorf("Mutex.Extend = %v, %v", ok, err)
	}
	if ok, err := m.UnlockContext(ctxT(t, 10*time.Second)); !ok || err != nil {
		t.Errorf("Mutex.Unlock = %v, %v", ok, err)
	}
	if _, err := c.Snapshot(ctxT(t, 10*time.Second)); err != nil {
		t.Errorf("Snapshot as the default user (pattern *): %v", err)
	}
}

// A user of --users gets the locks its pattern matches, and ErrNoPerm,
// not "locked" or "failed", for the others and for administration.
func TestAuthUserOutsideItsPattern(t *testing.T) {
	t.Parallel()
	addr := authNode(t)
	c := clientOf(t, []string{addr}, client.WithAuth(aliceUser, alicePassword))

	l, err := c.TryAcquire(ctxT(t, 10*time.Second), "app:orders")
	if err != nil {
		t.Fatalf("TryAcquire inside the pattern: %v", err)
	}
	if l.Token() == 0 {
		t.Fatal("granted with token 0")
	}
	defer l.Release(ctxT(t, 10*time.Second))

	start := time.Now()
	_, err = c.TryAcquire(ctxT(t, 10*time.Second), "billing")
	if !errors.Is(err, client.ErrNoPerm) || errors.Is(err, client.ErrLocked) || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("TryAcquire outside the pattern = %v; want ErrNoPerm (not ErrLocked) with the server's NOPERM", err)
	}
	if _, err := c.Acquire(ctxT(t, 10*time.Second), "billing"); !errors.Is(err, client.ErrNoPerm) {
		t.Errorf("Acquire outside the pattern = %v; want ErrNoPerm", err)
	}
	err = c.NewMutex("billing").LockContext(ctxT(t, 10*time.Second))
	if !errors.Is(err, client.ErrNoPerm) || errors.Is(err, client.ErrFailed) {
		t.Errorf("Mutex.Lock outside the pattern = %v; want ErrNoPerm (not ErrFailed)", err)
	}
	if _, _, err := c.Status(ctxT(t, 10*time.Second), "billing"); !errors.Is(err, client.ErrNoPerm) {
		t.Errorf("Status outside the pattern = %v; want ErrNoPerm", err)
	}
	if _, err := c.Snapshot(ctxT(t, 10*time.Second)); !errors.Is(err, client.ErrNoPerm) {
		t.Errorf("Snapshot by a user with pattern %q = %v; want ErrNoPerm", alicePattern, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the refusals took %v; they are not worth retrying", took)
	}
}

// Credentials the server refuses fail at once with ErrAuth: no other node
// would take them, and the request is not retried until the failover
// timeout as if the node were down.
func TestAuthRefusedFailsFast(t *testing.T) {
	t.Parallel()
	addr := authNode(t)
	for _, tc := range []struct {
		name  string
		addrs []string
		opts  []client.Option
		reply string
	}{
		{"wrong password", []string{addr}, []client.Option{client.WithAuth("", "wrong")}, "WRONGPASS"},
		{"unknown user", []string{addr}, []client.Option{client.WithAuth("mallory", alicePassword)}, "WRONGPASS"},
		{"another user's password", []string{addr}, []client.Option{client.WithAuth(aliceUser, testPassword)}, "WRONGPASS"},
		{"wrong password, two addresses", []string{addr, deadAddr(t)}, []client.Option{client.WithAuth("", "wrong")}, "WRONGPASS"},
		{"no credentials", []string{addr}, nil, "NOAUTH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clientOf(t, tc.addrs, append(tc.opts, client.WithFailoverTimeout(10*time.Second))...)
			start := time.Now()
			_, err := c.TryAcquire(ctxT(t, 20*time.Second), "app:refused")
			took := time.Since(start)
			if !errors.Is(err, client.ErrAuth) || !strings.Contains(err.Error(), tc.reply) {
				t.Fatalf("TryAcquire = %v; want ErrAuth with %s", err, tc.reply)
			}
			if errors.Is(err, client.ErrNoLeader) {
				t.Errorf("a refusal reported as no leader: %v", err)
			}
			if took > time.Second {
				t.Errorf("the refusal took %v; want it well within the failover timeout", took)
			}
			if err := c.NewMutex("app:refused").LockContext(ctxT(t, 20*time.Second)); !errors.Is(err, client.ErrAuth) {
				t.Errorf("Mutex.Lock = %v; want ErrAuth", err)
			}
		})
	}
}

// Every new connection authenticates before its first command: after the
// node closed an idle connection, and on another node after failing over.
func TestAuthOnEveryNewConnection(t *testing.T) {
	t.Parallel()
	a, stopA := secureNode(t, func(c *redisbridge.Config) {
		requireAuth(c)
		c.IdleTimeout = 300 * time.Millisecond
	}, client.WithAuth("", testPassword))
	b := authNode(t)
	c := clientOf(t, []string{a, b}, client.WithAuth("", testPassword), client.WithFailoverTimeout(5*time.Second))

	if _, _, err := c.Status(ctxT(t, 10*time.Second), "app:x"); err != nil {
		t.Fatalf("Status: %v", err)
	}
	time.Sleep(700 * time.Millisecond) // a closes the client's idle connections
	l, err := c.TryAcquire(ctxT(t, 10*time.Second), "app:x")
	if err != nil {
		t.Fatalf("TryAcquire after the node closed the idle connection: %v", err)
	}
	if st, held, err := c.Status(ctxT(t, 10*time.Second), "app:x"); err != nil || !held || st.Token != l.Token() {
		t.Fatalf("Status = %+v, %v, %v; want the lease just granted (on the first node)", st, held, err)
	}

	stopA()
	l2, err := c.TryAcquire(ctxT(t, 10*time.Second), "app:y")
	if err != nil {
		t.Fatalf("TryAcquire after failing over to the second node: %v", err)
	}
	if l2.Token() == 0 {
		t.Fatal("granted with token 0")
	}
	// The grant is b's: the lock taken on a is unknown there.
	if _, held, err := c.Status(ctxT(t, 10*time.Second), "app:x"); err != nil || held {
		t.Fatalf("Status of the first node's lock on the second = %v, %v; want free", held, err)
	}
}

func TestWithAuthNeedsAPassword(t *testing.T) {
	if _, err := client.New(addrs, client.WithAuth(aliceUser, "")); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("New with a user and no password = %v; want ErrInvalidArgument", err)
	}
	// A password against a node without authentication is accepted, as
	// Redis accepts any password of its default user then.
	c := clientOf(t, addrs, client.WithAuth("", "anything"))
	if _, _, err := c.Status(ctxT(t, 10*time.Second), "no-auth"); err != nil {
		t.Fatalf("Status with a password on a node without authentication: %v", err)
	}
}
