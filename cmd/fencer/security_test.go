package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/testca"
	"github.com/fencerlock/fencer/redisbridge"
	"github.com/redis/go-redis/v9"
)

// Credentials of the nodes these tests start: fencerd --requirepass
// sekret, and --users with alice, who may touch the locks "app:*".
const (
	testPassword  = "sekret"
	aliceUser     = "alice"
	alicePassword = "apw"
)

func requireAuth(c *redisbridge.Config) {
	c.RequirePass = testPassword
	c.Users = []redisbridge.User{redisbridge.NewUser(aliceUser, alicePassword, "app:*")}
}

// securedNode starts a real one-node cluster whose RESP bridge bmod
// configures, stopped when the test ends; warm configures a go-redis
// client that gets through to it.
func securedNode(t *testing.T, bmod func(*redisbridge.Config), warm func(*redis.Options)) string {
	t.Helper()
	stop, addr, err := startSecuredNode(bmod, warm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr
}

// runAt runs fencer against addr with env (and nothing else) as its
// environment.
func runAt(t *testing.T, addr string, env map[string]string, args ...string) result {
	t.Helper()
	e := map[string]string{"FENCER_ADDR": addr}
	for k, v := range env {
		e[k] = v
	}
	return fencerEnv(t, e, args...)
}

// wantOK fails the test unless r exited 0.
func wantOK(t *testing.T, what string, r result) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d, stdout %q, stderr %q", what, r.code, r.stdout, r.stderr)
	}
}

// wantToken returns the token of fencer acquire's output, which must be
// positive.
func wantToken(t *testing.T, r result) uint64 {
	t.Helper()
	tok, err := strconv.ParseUint(assignments(t, r.stdout)["FENCER_TOKEN"], 10, 64)
	if err != nil || tok == 0 {
		t.Fatalf("acquire printed %q: no positive token (%v)", r.stdout, err)
	}
	return tok
}

func TestPasswordFromFlagOrEnvironment(t *testing.T) {
	addr := securedNode(t, requireAuth, func(o *redis.Options) { o.Password = testPassword })

	r := runAt(t, addr, nil, "--password", testPassword, "acquire", "cli-auth", "--ttl", "20s")
	wantOK(t, "acquire --password", r)
	token := wantToken(t, r)
	owner := assignments(t, r.stdout)["FENCER_OWNER"]

	pass := map[string]string{"FENCER_PASSWORD": testPassword}
	r = runAt(t, addr, pass, "status", "cli-auth")
	wantOK(t, "status with FENCER_PASSWORD", r)
	if want := "owner=" + owner + " token=" + strconv.FormatUint(token, 10) + " "; !strings.HasPrefix(r.stdout, want) {
		t.Fatalf("status printed %q, want it to start with %q", r.stdout, want)
	}
	// The flag wins over the environment.
	r = runAt(t, addr, map[string]string{"FENCER_PASSWORD": "wrong"}, "--password", testPassword, "release", "cli-auth", owner)
	wantOK(t, "release --password with a wrong FENCER_PASSWORD", r)

	// No password: the server's NOAUTH, and a hint, at once.
	start := time.Now()
	r = runAt(t, addr, nil, "acquire", "cli-auth")
	if r.code != exitFailure || !strings.Contains(r.stderr, "NOAUTH") || !strings.Contains(r.stderr, "FENCER_PASSWORD") {
		t.Errorf("acquire without a password: exit %d, stderr %q; want 1, NOAUTH and a hint", r.code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("acquire without a password printed %q", r.stdout)
	}
	// A wrong password: WRONGPASS, not a 10s search for a leader.
	r = runAt(t, addr, map[string]string{"FENCER_PASSWORD": "wrong"}, "--timeout", "10s", "status", "cli-auth")
	if r.code != exitFailure || !strings.Contains(r.stderr, "WRONGPASS") {
		t.Errorf("status with a wrong password: exit %d, stderr %q; want 1 and WRONGPASS", r.code, r.stderr)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the two refusals took %v", took)
	}
	// lock reports it as a lock it could not take.
	r = runAt(t, addr, nil, "lock", "cli-auth", "--", "true")
	if r.code != exitLockFail || !strings.Contains(r.stderr, "NOAUTH") {
		t.Errorf("lock without a password: exit %d, stderr %q; want %d and NOAUTH", r.code, r.stderr, exitLockFail)
	}
}

func TestUserFromFlagOrEnvironment(t *testing.T) {
	addr := securedNode(t, requireAuth, func(o *redis.Options) { o.Password = testPassword })
	alice := map[string]string{"FENCER_USER": aliceUser, "FENCER_PASSWORD": alicePassword}

	r := runAt(t, addr, alice, "acquire", "app:1")
	wantOK(t, "acquire as alice (FENCER_USER)", r)
	wantToken(t, r)
	r = runAt(t, addr, nil, "--user", aliceUser, "--password", alicePassword, "acquire", "app:2")
	wantOK(t, "acquire as alice (--user)", r)
	wantToken(t, r)

	r = runAt(t, addr, alice, "acquire", "billing")
	if r.code != exitFailure || !strings.Contains(r.stderr, "NOPERM") || strings.Contains(r.stderr, "held by another owner") {
		t.Errorf("acquire outside alice's pattern: exit %d, stderr %q; want 1 and NOPERM", r.code, r.stderr)
	}
	r = runAt(t, addr, alice, "snapshot", "save", filepath.Join(t.TempDir(), "snap"))
	if r.code != exitFailure || !strings.Contains(r.stderr, "NOPERM") {
		t.Errorf("snapshot save as alice: exit %d, stderr %q; want 1 and NOPERM", r.code, r.stderr)
	}
	r = runAt(t, addr, map[string]string{"FENCER_USER": aliceUser}, "status", "app:1")
	if r.code != exitUsage || !strings.Contains(r.stderr, "needs a password") {
		t.Errorf("a user without a password: exit %d, stderr %q; want %d", r.code, r.stderr, exitUsage)
	}
}

// certFiles are PEM files made by an in-test CA.
type certFiles struct {
	ca, cert, key string // the CA, and a certificate for 127.0.0.1 and fencer.test with its key
	caPool        *x509.CertPool
	pair          tls.Certificate
}

// newCertFiles writes a new CA and one certificate it signed, usable by
// servers and clients, to a temporary directory.
func newCertFiles(t *testing.T) certFiles {
	t.Helper()
	dir := t.TempDir()
	ca := testca.New(t, "fencer test CA")
	certPEM, keyPEM := ca.IssuePEM(t, "node")
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	f := certFiles{ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"),
		caPool: ca.Pool, pair: pair}
	for path, data := range map[string][]byte{f.ca: ca.PEM, f.cert: certPEM, f.key: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// Every subcommand authenticates and speaks TLS with the global flags,
// against a node with mutual TLS (fencerd --tls-cert-file --tls-key-file
// --tls-ca-cert-file, --tls-auth-clients on) and --requirepass.
func TestEverySubcommandOverTLSWithAuth(t *testing.T) {
	certs := newCertFiles(t)
	addr := securedNode(t, func(c *redisbridge.Config) {
		requireAuth(c)
		c.TLS = &tls.Config{Certificates: []tls.Certificate{certs.pair}, ClientCAs: certs.caPool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	}, func(o *redis.Options) {
		o.Password = testPassword
		o.TLSConfig = &tls.Config{RootCAs: certs.caPool, Certificates: []tls.Certificate{certs.pair}}
	})
	env := map[string]string{"FENCER_PASSWORD": testPassword}
	tlsFlags := []string{"--tls-ca-cert-file", certs.ca, "--tls-cert-file", certs.cert, "--tls-key-file", certs.key}
	cli := func(args ...string) result {
		t.Helper()
		return runAt(t, addr, env, append(append([]string{}, tlsFlags...), args...)...)
	}

	r := cli("acquire", "tls-a", "--ttl", "20s")
	wantOK(t, "acquire", r)
	token := wantToken(t, r)
	owner := assignments(t, r.stdout)["FENCER_OWNER"]
	wantOK(t, "extend", cli("extend", "tls-a", owner))
	if r = cli("status", "tls-a"); r.code != 0 || !strings.Contains(r.stdout, "token="+strconv.FormatUint(token, 10)) {
		t.Fatalf("status: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	wantOK(t, "release", cli("release", "tls-a", owner))
	r = cli("lock", "tls-b", "--", "sh", "-c", `echo "$FENCER_TOKEN"`)
	wantOK(t, "lock", r)
	if got, err := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64); err != nil || got <= token {
		t.Fatalf("lock ran the command with token %q; want one above %d", r.stdout, token)
	}
	if r = cli("members"); r.code != 0 || !strings.Contains(r.stdout, addr) {
		t.Fatalf("members: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	snap := filepath.Join(t.TempDir(), "snap")
	wantOK(t, "snapshot save", cli("snapshot", "save", snap))
	if fi, err := os.Stat(snap); err != nil || fi.Size() == 0 {
		t.Fatalf("snapshot file: %v, %v", fi, err)
	}
	// The node answers remove itself: the request got through.
	if r = cli("remove", "no-such-node"); r.code != exitFailure || !strings.Contains(r.stderr, "no such member") {
		t.Fatalf("remove: exit %d, %q", r.code, r.stderr)
	}
	// A name the certificate carries, instead of the address.
	wantOK(t, "status --tls-server-name", cli("--tls-server-name", "fencer.test", "status", "tls-a"))
}

func TestTLSRefusals(t *testing.T) {
	certs := newCertFiles(t)
	addr := securedNode(t, func(c *redisbridge.Config) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{certs.pair}, ClientCAs: certs.caPool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	}, func(o *redis.Options) {
		o.TLSConfig = &tls.Config{RootCAs: certs.caPool, Certificates: []tls.Certificate{certs.pair}}
	})

	// No client certificate: refused at once, with the reason.
	start := time.Now()
	r := runAt(t, addr, nil, "--tls-ca-cert-file", certs.ca, "--timeout", "10s", "status", "x")
	if r.code != exitFailure || !strings.Contains(r.stderr, "certificate required") {
		t.Errorf("TLS without a client certificate: exit %d, stderr %q; want 1 and 'certificate required'", r.code, r.stderr)
	}
	// The system's CAs do not know the test CA.
	r = runAt(t, addr, nil, "--tls", "--timeout", "10s", "status", "x")
	if r.code != exitFailure || !strings.Contains(r.stderr, "unknown authority") {
		t.Errorf("TLS with the system's CAs: exit %d, stderr %q; want 1 and 'unknown authority'", r.code, r.stderr)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the refusals took %v", took)
	}
	// Without TLS the node only drops the connection.
	r = runAt(t, addr, nil, "--timeout", "500ms", "status", "x")
	if r.code != exitFailure || !strings.Contains(r.stderr, "or a TLS port without --tls") {
		t.Errorf("plain TCP to a TLS node: exit %d, stderr %q", r.code, r.stderr)
	}

	for _, args := range [][]string{
		{"--tls-cert-file", certs.cert, "status", "x"},
		{"--tls-key-file", certs.key, "status", "x"},
	} {
		if r := runAt(t, addr, nil, args...); r.code != exitUsage {
			t.Errorf("fencer %s: exit %d, stderr %q; want %d", strings.Join(args, " "), r.code, r.stderr, exitUsage)
		}
	}
	if r := runAt(t, addr, nil, "--tls-ca-cert-file", filepath.Join(t.TempDir(), "missing.pem"), "status", "x"); r.code != exitFailure || !strings.Contains(r.stderr, "--tls-ca-cert-file") {
		t.Errorf("a missing CA file: exit %d, stderr %q", r.code, r.stderr)
	}
}
