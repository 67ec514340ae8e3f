package console

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/redisbridge"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests serve the console without a node: logging in, sessions and
// the request checks touch none (the feed and the actions are driven
// against real fencerd processes in integration/console_test.go).

func newTestConsole(t *testing.T, mod func(*Config)) (*Console, *httptest.Server) {
	t.Helper()
	bc := redisbridge.DefaultConfig()
	bc.Users = []redisbridge.User{redisbridge.NewUser("admin", "admin-pass", "*"), redisbridge.NewUser("app", "app-pass", "app:*")}
	bc.ForwardUser = "admin"
	creds, err := bc.Credentials()
	require.NoError(t, err)
	cfg := Config{Check: func(n, p string) (string, bool) { u, ok := creds.Check(n, p); return u.Pattern, ok },
		NodeAddr: "127.0.0.1:1"}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(func() { srv.Close(); c.Close() })
	return c, srv
}

type client struct {
	t      *testing.T
	srv    *httptest.Server
	origin string
	cookie *http.Cookie
	token  string
}

func (cl *client) post(path, body string, hdr map[string]string) (*http.Response, map[string]any) {
	cl.t.Helper()
	req, err := http.NewRequest(http.MethodPost, cl.srv.URL+path, strings.NewReader(body))
	require.NoError(cl.t, err)
	if cl.origin != "" {
		req.Header.Set("Origin", cl.origin)
	}
	if cl.cookie != nil {
		req.AddCookie(cl.cookie)
	}
	if cl.token != "" {
		req.Header.Set(tokenHeader, cl.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(cl.t, err)
	defer res.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &m)
	return res, m
}

func (cl *client) login(user, pass string) int {
	cl.t.Helper()
	res, m := cl.post("/api/login", `{"user":"`+user+`","password":"`+pass+`"}`, nil)
	if res.StatusCode == http.StatusOK {
		for _, c := range res.Cookies() {
			if c.Name == cookieName {
				cl.cookie = c
			}
		}
		cl.token, _ = m["token"].(string)
	}
	return res.StatusCode
}

func TestLoginSetsAStrictCookie(t *testing.T) {
	for _, secure := range []bool{false, true} {
		_, srv := newTestConsole(t, func(c *Config) { c.Secure = secure })
		cl := &client{t: t, srv: srv, origin: srv.URL}
		require.Equal(t, http.StatusOK, cl.login("app", "app-pass"))
		ck := cl.cookie
		require.NotNil(t, ck)
		assert.True(t, ck.HttpOnly, "HttpOnly")
		assert.Equal(t, http.SameSiteStrictMode, ck.SameSite)
		assert.Equal(t, secure, ck.Secure, "Secure exactly when served over TLS")
		assert.Len(t, ck.Value, 64, "a random 32-byte ID")
		assert.NotContains(t, ck.Value, "app-pass")
		assert.Len(t, cl.token, 64)
		res, m := cl.post("/api/session", "", nil)
		assert.Equal(t, http.StatusOK, res.StatusCode)
		assert.Equal(t, map[string]any{"user": "app", "admin": false, "token": cl.token}, m)
	}
}

func TestLoginRefusals(t *testing.T) {
	_, srv := newTestConsole(t, func(c *Config) { c.LoginFailures = 3 })
	cl := &client{t: t, srv: srv, origin: srv.URL}
	// A password is never taken from a URL: the login is a POST with a body.
	res, err := http.Get(srv.URL + "/api/login?user=app&password=app-pass")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
	res, _ = cl.post("/api/login?"+url.Values{"user": {"app"}, "password": {"app-pass"}}.Encode(), "{}", nil)
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "the query's password is ignored")

	start := time.Now()
	assert.Equal(t, http.StatusUnauthorized, cl.login("app", "wrong"))
	assert.GreaterOrEqual(t, time.Since(start), failDelay, "a failed login is answered after failDelay")
	assert.Equal(t, http.StatusUnauthorized, cl.login("nobody", "app-pass"))
	// The third failure (the query above was the first) reaches the limit.
	assert.Equal(t, http.StatusTooManyRequests, cl.login("app", "app-pass"), "refused even with the right password once the limit is reached")
	assert.Nil(t, cl.cookie)
}

func TestEveryRequestNeedsTheOriginAndTheToken(t *testing.T) {
	_, srv := newTestConsole(t, nil)
	admin := &client{t: t, srv: srv, origin: srv.URL}
	require.Equal(t, http.StatusOK, admin.login("admin", "admin-pass"))
	app := &client{t: t, srv: srv, origin: srv.URL}
	require.Equal(t, http.StatusOK, app.login("app", "app-pass"))

	for _, path := range []string{"/api/feed", "/api/revoke", "/api/transfer", "/api/logout", "/api/session"} {
		for name, origin := range map[string]string{"no Origin": "", "another origin": "http://evil.example", "another port": "http://127.0.0.1:1"} {
			cl := *admin
			cl.origin = origin
			res, m := cl.post(path, `{"target":"app:x","confirm":"app:x"}`, nil)
			assert.Equal(t, http.StatusForbidden, res.StatusCode, "%s %s", path, name)
			assert.Contains(t, m["error"], "Origin", "%s %s", path, name)
		}
		noCookie := &client{t: t, srv: srv, origin: srv.URL, token: admin.token}
		res, _ := noCookie.post(path, `{}`, nil)
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "%s without the cookie", path)
	}
	for _, path := range []string{"/api/feed", "/api/revoke", "/api/transfer", "/api/logout"} {
		for name, token := range map[string]string{"no token": "", "another session's token": app.token} {
			cl := *admin
			cl.token = ""
			res, m := cl.post(path, `{"target":"app:x","confirm":"app:x"}`, map[string]string{tokenHeader: token})
			assert.Equal(t, http.StatusForbidden, res.StatusCode, "%s %s", path, name)
			assert.Contains(t, m["error"], tokenHeader, "%s %s", path, name)
		}
	}
	// The actions need an admin, and the target typed again.
	res, m := app.post("/api/revoke", `{"target":"app:x","confirm":"app:x"}`, nil)
	assert.Equal(t, http.StatusForbidden, res.StatusCode)
	assert.Contains(t, m["error"], "not an admin")
	for _, body := range []string{`{"target":"app:x"}`, `{"target":"app:x","confirm":"app:y"}`, `{"target":"","confirm":""}`, `not json`} {
		res, _ := admin.post("/api/revoke", body, nil)
		assert.Equal(t, http.StatusBadRequest, res.StatusCode, body)
	}
	res, m = admin.post("/api/transfer", `{"target":"","confirm":""}`, nil)
	assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	assert.Contains(t, m["error"], `"any"`)

	res, _ = admin.post("/api/logout", "", nil)
	assert.Equal(t, http.StatusOK, res.StatusCode)
	res, _ = admin.post("/api/session", "", nil)
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "the session ended with the logout")
}

func TestSessionLimits(t *testing.T) {
	_, srv := newTestConsole(t, func(c *Config) { c.MaxSessions, c.MaxUserSessions, c.SessionIdle = 3, 2, 300*time.Millisecond })
	login := func(user, pass string) (*client, int) {
		cl := &client{t: t, srv: srv, origin: srv.URL}
		return cl, cl.login(user, pass)
	}
	a1, code := login("app", "app-pass")
	require.Equal(t, http.StatusOK, code)
	_, code = login("app", "app-pass")
	require.Equal(t, http.StatusOK, code)
	_, code = login("app", "app-pass")
	assert.Equal(t, http.StatusServiceUnavailable, code, "a user's third session")
	_, code = login("admin", "admin-pass")
	require.Equal(t, http.StatusOK, code)
	_, code = login("admin", "admin-pass")
	assert.Equal(t, http.StatusServiceUnavailable, code, "past MaxSessions")
	time.Sleep(600 * time.Millisecond)
	res, _ := a1.post("/api/session", "", nil)
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "an idle session ends")
	_, code = login("admin", "admin-pass")
	assert.Equal(t, http.StatusOK, code, "the idle sessions' room is free again")
}

func TestPageHoldsNoDataAndLoadsNothingFromElsewhere(t *testing.T) {
	_, srv := newTestConsole(t, nil)
	total := 0
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		total += len(b)
		assert.NotRegexp(t, `(src|href)="(https?:)?//`, string(b), "%s loads from elsewhere", p)
		assert.NotContains(t, string(b), "import ", "%s imports a module", p)
		return err
	})
	require.NoError(t, err)
	assert.Less(t, total, 100<<10, "the assets are small")
	for path, ctype := range map[string]string{"/": "text/html", "/app.js": "text/javascript", "/app.css": "text/css"} {
		res, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode, path)
		assert.Contains(t, res.Header.Get("Content-Type"), ctype, path)
		assert.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'", path)
		assert.Equal(t, "DENY", res.Header.Get("X-Frame-Options"), path)
	}
	res, err := http.Get(srv.URL + "/api/feed")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, res.StatusCode, "no data by GET")
}

func TestAnOpenFeedKeepsItsSession(t *testing.T) {
	_, srv := newTestConsole(t, func(c *Config) { c.SessionIdle = 300 * time.Millisecond })
	cl := &client{t: t, srv: srv, origin: srv.URL}
	require.Equal(t, http.StatusOK, cl.login("app", "app-pass"))
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/feed", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", srv.URL)
	req.Header.Set(tokenHeader, cl.token)
	req.AddCookie(cl.cookie)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	// The feed says the node cannot be read (there is none here) and
	// stays open.
	var first map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&first))
	assert.Equal(t, "error", first["type"])
	time.Sleep(600 * time.Millisecond)
	r, _ := cl.post("/api/session", "", nil)
	assert.Equal(t, http.StatusOK, r.StatusCode, "a session whose feed is open is not idle")
	res.Body.Close()
	time.Sleep(200 * time.Millisecond) // the server sees the feed end
	time.Sleep(600 * time.Millisecond)
	r, _ = cl.post("/api/session", "", nil)
	assert.Equal(t, http.StatusUnauthorized, r.StatusCode, "idle once the feed closed")
}
