package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/testca"
)

// The web console in a real browser: headless Chromium (Debian's package,
// driven by playwright-core, pinned in integration/console/package.json)
// against three fencerd processes with --ui. The cluster is started here,
// with the harness every other cluster test uses, and the browser's steps
// are integration/console/run.mjs, which this test runs with node: the
// harness already builds the binaries, finds ports, watches the processes'
// logs for panics and stops them, and a spec in JavaScript is what drives
// the browser with the least glue (playwright-core's own language).
//
// make check runs the "live" spec (a lock, its countdown, its waiters, a
// release, a leader kill); FENCER_CONSOLE_FULL=1 (make check-full) adds
// "access" (no login, a limited user, cross-origin and token checks, the
// admin's revoke and its audit line). FENCER_CONSOLE_SHOTS names a
// directory for the screenshots (make console-screenshots: docs/console).
func TestConsoleBrowser(t *testing.T) {
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("no Chromium at %s (%v): the console's browser tests need Debian's chromium (scripts/deps.sh installs it), or CHROMIUM naming another", chromium, err)
	}
	specDir, err := filepath.Abs("console")
	if err != nil {
		t.Fatal(err)
	}
	npmInstall(t, specDir)

	dir := t.TempDir()
	users := map[string]string{"admin": "admin-pass", "app": "app-pass", "node": "node-pass"}
	usersFile := filepath.Join(dir, "users")
	if err := os.WriteFile(usersFile, []byte("admin admin-pass *\napp app-pass app:*\nnode node-pass *\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ds := newDaemons(t, 3)
	uiPorts := freePorts(t, 3)
	for i, d := range ds {
		d.args = append(d.args, "--users", usersFile, "--forward-user", "node", "--http-listen", "off",
			"--ui", "127.0.0.1:"+uiPorts[i], "--member-unreachable-after", "1s")
		if i > 0 {
			d.args = append(d.args, "--join", ds[0].addr)
		}
		d.start(t)
	}
	// The first node bootstrapped and leads; wait until the others know it.
	cli := func(d *daemon, args ...string) string {
		t.Helper()
		return secCLI(t, d.port, append([]string{"--user", "admin", "--pass", "admin-pass", "--no-auth-warning"}, args...)...)
	}
	for _, d := range ds[1:] {
		for deadline := time.Now().Add(clusterReadyTimeout); !strings.HasSuffix(cli(d, "FENCE.LEADER"), ds[0].addr); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never knew the leader", d.addr)
			}
		}
	}
	type node struct {
		Port string `json:"port"`
		UI   string `json:"ui"`
		PID  int    `json:"pid"`
		ID   string `json:"id"`
		Log  string `json:"log"`
	}
	spec := struct {
		Nodes       []node            `json:"nodes"`
		Console     int               `json:"console"`
		Leader      int               `json:"leader"`
		Users       map[string]string `json:"users"`
		Chromium    string            `json:"chromium"`
		Screenshots string            `json:"screenshots"`
		Specs       []string          `json:"specs"`
		// ElectionPoll bounds the wait for a new leader and the killed
		// node shown as stopped: an election (Raft's default timeouts,
		// one to three seconds), the new leader's health probe
		// (--member-unreachable-after) and the next listing.
		ElectionPoll int `json:"electionPoll"`
	}{Console: 1, Leader: 0, Users: users, Chromium: chromium, Screenshots: os.Getenv("FENCER_CONSOLE_SHOTS"),
		Specs: []string{"live"}, ElectionPoll: int(clusterElectionTimeout / time.Millisecond)}
	if os.Getenv("FENCER_CONSOLE_FULL") != "" {
		spec.Specs = append(spec.Specs, "access")
	}
	for i, d := range ds {
		spec.Nodes = append(spec.Nodes, node{Port: d.port, UI: "http://127.0.0.1:" + uiPorts[i] + "/", PID: d.proc.cmd.Process.Pid, ID: nodeID(t, d), Log: d.proc.logPath})
	}
	specFile := filepath.Join(dir, "spec.json")
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(specFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(specDir, "run.mjs"), specFile)
	cmd.Dir = specDir
	out, err := cmd.CombinedOutput()
	t.Logf("browser specs %v (%v):\n%s", spec.Specs, time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("the browser specs failed: %v", err)
	}
	if got, _ := os.ReadFile(specFile + ".done"); string(got) != "passed" {
		t.Fatalf("the browser specs did not report passing: %q", got)
	}
}

// nodeID returns d's Raft ID: FENCE.MEMBERS lists each member as its ID,
// Raft address, client address and role.
func nodeID(t *testing.T, d *daemon) string {
	t.Helper()
	lines := strings.Split(secCLI(t, d.port, "--user", "admin", "--pass", "admin-pass", "--no-auth-warning", "FENCE.MEMBERS"), "\n")
	for i := 2; i < len(lines); i++ {
		if lines[i] == d.addr {
			return lines[i-2]
		}
	}
	t.Fatalf("no ID for %s in FENCE.MEMBERS:\n%s", d.addr, strings.Join(lines, "\n"))
	return ""
}

// npmInstall installs the spec's pinned packages into dir/node_modules
// unless they are there already, with npm's cache outside the clone.
func npmInstall(t *testing.T, dir string) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if have, err := os.ReadFile(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil && sameLock(have, lock) {
		return
	}
	cache := os.Getenv("NPM_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "fencer-npm")
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_cache="+cache)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
}

// sameLock reports whether node_modules/.package-lock.json (what npm
// installed) has the packages package-lock.json pins.
func sameLock(installed, lock []byte) bool {
	var a, b struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if json.Unmarshal(installed, &a) != nil || json.Unmarshal(lock, &b) != nil {
		return false
	}
	for k, v := range b.Packages {
		if k == "" {
			continue
		}
		if a.Packages[k].Version != v.Version {
			return false
		}
	}
	return len(b.Packages) > 1
}

// With the node's certificates the console is served over TLS only, its
// cookie is Secure, and it reaches its node over mutual TLS (the node asks
// clients for a certificate: the console presents the node's own).
func TestConsoleOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testca.New(t, "console CA")
	files := secTLSFiles{cert: filepath.Join(dir, "node.pem"), key: filepath.Join(dir, "node-key.pem"), ca: filepath.Join(dir, "ca.pem")}
	files.install(t, ca)
	usersFile := filepath.Join(dir, "users")
	secWriteFile(t, usersFile, []byte("admin admin-pass *\n"))
	uiAddr := "127.0.0.1:" + freePorts(t, 1)[0]
	d := secStartLoopback(t, dir, []string{"--tls-cert-file", files.cert, "--tls-key-file", files.key, "--tls-ca-cert-file", files.ca,
		"--users", usersFile, "--forward-user", "admin", "--ui", uiAddr},
		func(d *daemon) error { return secTLSPing(d.addr, secTLSConfig(t, ca)) })
	client := secClientFilesOf(t, ca, dir, "cli")
	if got := secCLI(t, d.port, client.args("--user", "admin", "--pass", "admin-pass", "--no-auth-warning", "FENCE.ACQUIRE", "tls:lock", "me", "60000")...); !secGranted(got) {
		t.Fatalf("FENCE.ACQUIRE over TLS: %q", got)
	}

	plain := &http.Client{Timeout: 5 * time.Second}
	// Go's TLS server answers a plain HTTP request with a 400 that says
	// so, and nothing else.
	if res, err := plain.Get("http://" + uiAddr + "/"); err == nil {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || strings.Contains(string(b), "fencer console") {
			t.Fatalf("plain HTTP to the console answered %s: %s", res.Status, b)
		}
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Timeout: 10 * time.Second, Jar: jar, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}}
	base := "https://" + uiAddr
	post := func(path, token, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Origin", base)
		req.Header.Set("X-Fencer-Token", token)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		return res
	}
	res := post("/api/login", "", `{"user":"admin","password":"admin-pass"}`)
	var login struct{ Token string }
	_ = json.NewDecoder(res.Body).Decode(&login)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || login.Token == "" {
		t.Fatalf("login over TLS: %s", res.Status)
	}
	var secure bool
	for _, c := range res.Cookies() {
		secure = c.Name == "fencer_console" && c.Secure && c.HttpOnly
	}
	if !secure {
		t.Errorf("the session cookie over TLS is not Secure and HttpOnly: %v", res.Header.Values("Set-Cookie"))
	}
	res = post("/api/feed", login.Token, "")
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Type  string
			Locks []struct{ Name string }
		}
		_ = json.Unmarshal(sc.Bytes(), &l)
		if l.Type == "locks" {
			if len(l.Locks) != 1 || l.Locks[0].Name != "tls:lock" {
				t.Fatalf("the feed's listing over TLS: %s", sc.Bytes())
			}
			return
		}
	}
	t.Fatalf("the feed ended without a listing: %v", sc.Err())
}
