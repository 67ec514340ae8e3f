package integration

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/redistest"
	"github.com/fencerlock/fencer/internal/testca"
)

// Protected mode: on an address other hosts can reach and without a
// password, fencerd refuses to start (before it touches its data
// directory). With --requirepass it starts there, and then every command
// but PING needs the password.
func TestSecurityProtectedModeAndRequirePass(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 2)
	dataDir := filepath.Join(dir, "data")
	args := []string{"--data-dir", dataDir, "--listen", net.JoinHostPort("0.0.0.0", ports[0]),
		"--advertise", net.JoinHostPort("127.0.0.1", ports[0]), "--raft-listen", net.JoinHostPort("127.0.0.1", ports[1]),
		"--http-listen", "off"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, fencerdBin, args...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("fencerd on 0.0.0.0 without a password: want a non-zero exit, got %v\n%s", err, out)
	}
	for _, want := range []string{"is not a loopback address", "protected mode", "--requirepass"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("refusal message lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused start touched --data-dir: stat: %v", err)
	}

	d := secStart(t, &daemon{dir: dir, dataDir: dataDir, port: ports[0], addr: net.JoinHostPort("127.0.0.1", ports[0]),
		args: append(args, "--requirepass", "s3cret")}, func(d *daemon) error { return pingOnce(d.addr) })

	// Without AUTH: refused, and nothing is acquired.
	if got := secCLI(t, d.port, "FENCE.ACQUIRE", "a", "intruder", "10000"); got != "NOAUTH Authentication required." {
		t.Errorf("FENCE.ACQUIRE without AUTH: got %q, want NOAUTH", got)
	}
	if got := secCLI(t, d.port, "-a", "wrong", "--no-auth-warning", "PING"); !strings.Contains(got, "WRONGPASS") {
		t.Errorf("a wrong password: got %q, want WRONGPASS", got)
	}
	if got := secCLI(t, d.port, "-a", "s3cret", "--no-auth-warning", "FENCE.ACQUIRE", "a", "me", "10000"); !secGranted(got) {
		t.Errorf("FENCE.ACQUIRE with -a: got %q, want a grant", got)
	}
	if !strings.Contains(d.log(t), "authentication failed") {
		t.Errorf("the wrong password was not logged")
	}
	if code, _ := d.terminate(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// --users: each user may touch only the locks its pattern matches; a user
// whose password is given as a sha256: digest authenticates with the
// password; admin commands need pattern *.
func TestSecurityUsers(t *testing.T) {
	dir := t.TempDir()
	digest := sha256.Sum256([]byte("reports-pass"))
	users := "# user password pattern\n" +
		"billing billing-pass billing:*\n" +
		"reports sha256:" + hex.EncodeToString(digest[:]) + " reports:*\n" +
		"node node-pass *\n"
	usersFile := filepath.Join(dir, "users")
	if err := os.WriteFile(usersFile, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	d := secStartLoopback(t, dir, []string{"--users", usersFile, "--forward-user", "node"},
		func(d *daemon) error { return pingOnce(d.addr) })
	as := func(user, pass string, args ...string) string {
		t.Helper()
		return secCLI(t, d.port, append([]string{"--user", user, "--pass", pass, "--no-auth-warning"}, args...)...)
	}

	if got := secCLI(t, d.port, "FENCE.ACQUIRE", "billing:x", "me", "10000"); got != "NOAUTH Authentication required." {
		t.Errorf("without AUTH: got %q, want NOAUTH", got)
	}
	if got := as("billing", "billing-pass", "FENCE.ACQUIRE", "billing:invoice-7", "me", "10000"); !secGranted(got) {
		t.Errorf("billing acquiring billing:invoice-7: got %q, want a grant", got)
	}
	for _, args := range [][]string{
		{"FENCE.ACQUIRE", "orders:1", "me", "10000"},
		{"SET", "orders:1", "me", "NX", "PX", "10000"},
		{"FENCE.STATUS", "reports:daily"},
	} {
		if got := as("billing", "billing-pass", args...); got != "NOPERM No permissions to access a key" {
			t.Errorf("billing: %v: got %q, want NOPERM", args, got)
		}
	}
	if got := as("billing", "billing-pass", "FENCE.SNAPSHOT"); !strings.HasPrefix(got, "NOPERM") {
		t.Errorf("billing: FENCE.SNAPSHOT: got %q, want NOPERM (admin commands need pattern *)", got)
	}
	if got := as("reports", "reports-pass", "FENCE.ACQUIRE", "reports:daily", "me", "10000"); !secGranted(got) {
		t.Errorf("reports (sha256: digest in the file) acquiring reports:daily: got %q, want a grant", got)
	}
	if got := as("reports", "sha256:"+hex.EncodeToString(digest[:]), "PING"); !strings.Contains(got, "WRONGPASS") {
		t.Errorf("the digest itself as the password: got %q, want WRONGPASS", got)
	}
	if got := as("billing", "reports-pass", "PING"); !strings.Contains(got, "WRONGPASS") {
		t.Errorf("another user's password: got %q, want WRONGPASS", got)
	}
	// The refused commands took nothing: the lock is free for a user with *.
	if got := as("node", "node-pass", "FENCE.ACQUIRE", "orders:1", "other", "10000"); !secGranted(got) {
		t.Errorf("node acquiring orders:1 after billing's refused attempts: got %q, want a grant", got)
	}
	if code, _ := d.terminate(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// RESP over mutual TLS with redis-cli, and certificate reload on SIGHUP: a
// bad file is refused and the node goes on with its certificates; then the
// files are replaced by certificates of a new CA, and after the SIGHUP a
// client that trusts only the new CA is served, one of the old CA is
// refused, and a connection opened before the reload, a held lock and the
// process all carry on.
func TestTLSReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	oldCA, newCA := testca.New(t, "old CA"), testca.New(t, "new CA")
	files := secTLSFiles{cert: filepath.Join(dir, "node.pem"), key: filepath.Join(dir, "node-key.pem"), ca: filepath.Join(dir, "ca.pem")}
	files.install(t, oldCA)
	oldClient, newClient := secClientFilesOf(t, oldCA, dir, "old"), secClientFilesOf(t, newCA, dir, "new")

	d := secStartLoopback(t, dir, []string{"--tls-cert-file", files.cert, "--tls-key-file", files.key,
		"--tls-ca-cert-file", files.ca, "--raft-tls"},
		func(d *daemon) error { return secTLSPing(d.addr, secTLSConfig(t, oldCA)) })

	if got := secCLI(t, d.port, oldClient.args("FENCE.ACQUIRE", "a", "me", "60000")...); !secGranted(got) {
		t.Fatalf("redis-cli --tls with the old CA's certificate: got %q, want a grant", got)
	}
	if got := secCLI(t, d.port, "PING"); strings.Contains(got, "PONG") {
		t.Errorf("plain TCP redis-cli on the TLS port: got %q", got)
	}
	if got := secCLI(t, d.port, "--tls", "--cacert", oldClient.ca, "PING"); strings.Contains(got, "PONG") {
		t.Errorf("redis-cli --tls without a client certificate: got %q, want refused", got)
	}
	// A connection opened before the reloads, used again after them.
	before := secDialTLS(t, d.addr, secTLSConfig(t, oldCA))

	// A half-written certificate: the reload fails and the node keeps its
	// certificates.
	secWriteFile(t, files.cert, []byte("-----BEGIN CERTIFICATE-----\ntruncated"))
	secSIGHUP(t, d, "TLS reload failed")
	if got := secCLI(t, d.port, oldClient.args("PING")...); got != "PONG" {
		t.Errorf("after a failed reload, a client of the old CA: got %q, want PONG", got)
	}

	// A new CA: the node's certificate and the CA that clients are
	// verified against.
	files.install(t, newCA)
	if got := secCLI(t, d.port, newClient.args("PING")...); got == "PONG" {
		t.Fatalf("before the reload, a client of the new CA was served")
	}
	secSIGHUP(t, d, "reloaded TLS certificates")
	if got := secCLI(t, d.port, newClient.args("FENCE.STATUS", "a")...); !strings.HasPrefix(got, "me\n") {
		t.Errorf("after the reload, redis-cli --tls trusting only the new CA: FENCE.STATUS a: got %q, want held by me", got)
	}
	if got := secCLI(t, d.port, oldClient.args("PING")...); got == "PONG" {
		t.Errorf("after the reload, a client of the old CA was served")
	}
	if v := before.do(t, "FENCE.EXTEND", "a", "me", "60000"); v != int64(1) {
		t.Errorf("the connection opened before the reload: FENCE.EXTEND: got %#v, want 1", v)
	}
	if d.proc.done() {
		t.Fatalf("fencerd did not keep running through the reloads")
	}
	if code, _ := d.terminate(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// secStartLoopback starts fencerd on free loopback ports in dir with extra
// flags.
func secStartLoopback(t *testing.T, dir string, extra []string, ready func(*daemon) error) *daemon {
	t.Helper()
	ports := freePorts(t, 2)
	d := newDaemon(dir, ports[0], ports[1])
	d.args = append(append(d.args, "--http-listen", "off"), extra...)
	return secStart(t, d, ready)
}

// secStart runs d's binary and flags, and waits until ready answers nil (the
// harness's start checks with a plain-TCP PING, which a TLS port does not
// answer). The process is stopped when the test ends.
func secStart(t *testing.T, d *daemon, ready func(*daemon) error) *daemon {
	t.Helper()
	d.ready = ready
	d.start(t)
	return d
}

// secCLI runs redis-cli against 127.0.0.1:port and returns its output
// without the final newline. Error replies are output like any other (and
// may make redis-cli exit non-zero); so is a failed connection.
func secCLI(t *testing.T, port string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", "127.0.0.1", "-p", port}, args...)...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// secGranted reports whether redis-cli printed a FENCE.ACQUIRE grant: a
// token and the lease.
func secGranted(out string) bool {
	lines := strings.Split(out, "\n")
	return len(lines) == 2 && lines[0] != "" && lines[0][0] >= '1' && lines[0][0] <= '9'
}

// secSIGHUP sends SIGHUP and waits until the log shows want once more than
// before.
func secSIGHUP(t *testing.T, d *daemon, want string) {
	t.Helper()
	n := strings.Count(d.log(t), want)
	if err := d.proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatalf("SIGHUP: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(d.log(t), want) <= n {
		if d.proc.done() {
			t.Fatalf("fencerd exited on SIGHUP: %v", d.proc.state)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log within 5s of SIGHUP", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// secWriteFile replaces path as an operator should: a new file renamed
// over the old one.
func secWriteFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// secTLSConfig is a Go client's config: trusts only ca, presents a
// certificate from it.
func secTLSConfig(t *testing.T, ca *testca.CA) *tls.Config {
	t.Helper()
	return &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{ca.Issue(t, "go client")}}
}

// secClientFiles are a redis-cli client's TLS files.
type secClientFiles struct{ ca, cert, key string }

// secClientFilesOf writes ca's certificate and a client certificate from it
// for redis-cli.
func secClientFilesOf(t *testing.T, ca *testca.CA, dir, name string) secClientFiles {
	t.Helper()
	f := secClientFiles{ca: filepath.Join(dir, name+"-ca.pem"), cert: filepath.Join(dir, name+"-client.pem"),
		key: filepath.Join(dir, name+"-client-key.pem")}
	c, k := ca.IssuePEM(t, name+" client")
	secWriteFile(t, f.ca, ca.PEM)
	secWriteFile(t, f.cert, c)
	secWriteFile(t, f.key, k)
	return f
}

// args are redis-cli's flags for mutual TLS with f, then args.
func (f secClientFiles) args(args ...string) []string {
	return append([]string{"--tls", "--cacert", f.ca, "--cert", f.cert, "--key", f.key}, args...)
}

// secTLSFiles are a node's --tls-* files.
type secTLSFiles struct{ cert, key, ca string }

// install replaces the files by a node certificate from ca and ca's
// certificate.
func (f secTLSFiles) install(t *testing.T, ca *testca.CA) {
	t.Helper()
	c, k := ca.IssuePEM(t, "node")
	secWriteFile(t, f.key, k)
	secWriteFile(t, f.cert, c)
	secWriteFile(t, f.ca, ca.PEM)
}

// secTLSPing sends PING over TLS and checks the reply.
func secTLSPing(addr string, cfg *tls.Config) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	return redistest.Ping(c)
}

// secDialTLS opens a RESP connection over TLS, closed when the test ends.
func secDialTLS(t *testing.T, addr string, cfg *tls.Config) *respConn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &respConn{c: c, r: bufio.NewReader(c)}
}
