package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/redis/go-redis/v9"
)

//go:embed assets
var assets embed.FS

// Watcher streams the events of the keys under a prefix (the live feed):
// server.Node's WatchPrefix.
type Watcher interface {
	WatchPrefix(prefix string, from uint64, resume bool) (*server.Watch, error)
}

// Config configures a Console.
type Config struct {
	// Check returns the pattern of the user name with password, or false
	// (redisbridge.Credentials.Check).
	Check func(name, password string) (pattern string, ok bool)
	// NodeAddr is the node's client (RESP) address, and DialTLS the TLS
	// config to reach it with (nil: plain TCP).
	NodeAddr string
	DialTLS  *tls.Config
	// Watches, if set, feeds the grants and releases as they happen;
	// without it the page shows the listings only.
	Watches Watcher
	// Secure is set when the console is served over TLS: the session
	// cookie is then sent only over TLS.
	Secure bool
	// Logger receives the console's logs; nil means slog.Default().
	Logger *slog.Logger

	// MaxSessions bounds the sessions open at once, MaxUserSessions one
	// user's. The defaults are 64 and 8.
	MaxSessions, MaxUserSessions int
	// SessionIdle ends a session not used for that long, SessionLifetime
	// any session that old. The defaults are 30m and 12h.
	SessionIdle, SessionLifetime time.Duration
	// LoginFailures is how many failed logins one address may make in
	// LoginWindow before it is refused until the window passes. The
	// defaults are 10 and 1m.
	LoginFailures int
	LoginWindow   time.Duration
	// ListEvery is how often the feed re-reads the listings. The default
	// is 1s.
	ListEvery time.Duration
}

func (c *Config) setDefaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxSessions, 64)
	def(&c.MaxUserSessions, 8)
	def(&c.LoginFailures, 10)
	defD(&c.SessionIdle, 30*time.Minute)
	defD(&c.SessionLifetime, 12*time.Hour)
	defD(&c.LoginWindow, time.Minute)
	defD(&c.ListEvery, time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Console serves the web console. Its mu guards the sessions and the
// failed logins.
type Console struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux

	mu       sync.Mutex
	sessions map[string]*session
	failures map[string]*failures
	feeds    map[*session]int // feeds open per session
	closed   bool
}

// session is one logged-in browser. Its fields but lastUsed never change;
// the console's mu guards lastUsed.
type session struct {
	id, token     string
	user, pattern string
	created       time.Time
	lastUsed      time.Time
	rdb           *redis.Client // to the node, as the user
	ctx           context.Context
	end           context.CancelFunc // ends its feeds
}

func (s *session) admin() bool { return s.pattern == "*" }

// failures counts one address's failed logins since start.
type failures struct {
	n     int
	start time.Time
}

// maxFailureAddrs bounds the addresses whose failures are remembered; past
// it every address is refused until old windows pass (a flood of addresses
// cannot make the console forget a guesser).
const maxFailureAddrs = 10000

// failDelay is how long a failed login waits before it is answered, as
// AUTH does.
const failDelay = 200 * time.Millisecond

// cookieName names the session cookie; tokenHeader the header that carries
// the session's token.
const (
	cookieName  = "fencer_console"
	tokenHeader = "X-Fencer-Token"
)

// New returns a console; serve its Handler.
func New(cfg Config) (*Console, error) {
	if cfg.Check == nil {
		return nil, errors.New("console: no users to log in (Check)")
	}
	if cfg.NodeAddr == "" {
		return nil, errors.New("console: no node address")
	}
	cfg.setDefaults()
	c := &Console{cfg: cfg, log: cfg.Logger, sessions: map[string]*session{}, failures: map[string]*failures{}, feeds: map[*session]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.asset("assets/index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /app.js", c.asset("assets/app.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /app.css", c.asset("assets/app.css", "text/css; charset=utf-8"))
	mux.HandleFunc("POST /api/login", c.sameOrigin(c.login))
	mux.HandleFunc("POST /api/session", c.sameOrigin(c.withSession(false, c.whoami)))
	mux.HandleFunc("POST /api/logout", c.sameOrigin(c.withSession(false, c.logout)))
	mux.HandleFunc("POST /api/feed", c.sameOrigin(c.withSession(false, c.feed)))
	mux.HandleFunc("POST /api/revoke", c.sameOrigin(c.withSession(true, c.revoke)))
	mux.HandleFunc("POST /api/transfer", c.sameOrigin(c.withSession(true, c.transfer)))
	c.mux = mux
	return c, nil
}

// Handler returns the console's HTTP handler.
func (c *Console) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		c.mux.ServeHTTP(w, r)
	})
}

// Close ends every session and its feeds.
func (c *Console) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, s := range c.sessions {
		c.endLocked(id, s)
	}
}

func (c *Console) asset(name, contentType string) http.HandlerFunc {
	body, err := assets.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time
	}
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}
}

// sameOrigin refuses a request whose Origin is not the console's own: a
// page of another site cannot make the browser send it (the cookie is
// SameSite=Strict too; this does not depend on the browser honouring that).
func (c *Console) sameOrigin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		if origin := r.Header.Get("Origin"); origin != scheme+"://"+r.Host {
			c.log.Warn("console: refused a request from another origin", "path", r.URL.Path, "origin", truncate(origin, 128), "remote", r.RemoteAddr)
			httpError(w, http.StatusForbidden, "cross-origin request refused: the Origin header must name this console")
			return
		}
		next(w, r)
	}
}

// withSession finds the request's session (its cookie and its token), or
// answers 401; with admin, it answers 403 unless the user is an admin.
func (c *Console) withSession(admin bool, next func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.session(r)
		if s == nil {
			httpError(w, http.StatusUnauthorized, "not logged in")
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(tokenHeader)), []byte(s.token)) != 1 && r.URL.Path != "/api/session" {
			httpError(w, http.StatusForbidden, "missing or wrong "+tokenHeader+" header")
			return
		}
		if admin && !s.admin() {
			httpError(w, http.StatusForbidden, fmt.Sprintf("user %s is not an admin (pattern *)", s.user))
			return
		}
		next(w, r, s)
	}
}

// session returns the live session r's cookie names, or nil.
func (c *Console) session(r *http.Request) *session {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(now)
	s := c.sessions[ck.Value]
	if s == nil {
		return nil
	}
	s.lastUsed = now
	return s
}

// expireLocked ends the sessions idle or old past their limits. A session
// with a feed open is in use (a console left open on a screen).
func (c *Console) expireLocked(now time.Time) {
	for id, s := range c.sessions {
		idle := c.feeds[s] == 0 && now.Sub(s.lastUsed) > c.cfg.SessionIdle
		if idle || now.Sub(s.created) > c.cfg.SessionLifetime {
			c.endLocked(id, s)
		}
	}
}

func (c *Console) endLocked(id string, s *session) {
	delete(c.sessions, id)
	s.end()
	_ = s.rdb.Close()
}

type loginRequest struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

type sessionReply struct {
	User  string `json:"user"`
	Admin bool   `json:"admin"`
	Token string `json:"token"`
}

// login: POST /api/login {"user","password"} → the session cookie and
// {"user","admin","token"}.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	bodyDeadline(w)
	var req loginRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "want a JSON body {\"user\": ..., \"password\": ...}")
		return
	}
	if req.User == "" {
		req.User = "default" // --requirepass alone: AUTH with only a password
	}
	addr := remoteHost(r)
	if wait := c.refusedFor(addr, time.Now()); wait > 0 {
		httpError(w, http.StatusTooManyRequests, fmt.Sprintf("too many failed logins from %s: try again in %s", addr, wait.Round(time.Second)))
		return
	}
	pattern, ok := c.cfg.Check(req.User, req.Password)
	if !ok {
		c.failed(addr, time.Now())
		c.log.Warn("console: login failed", "remote", r.RemoteAddr, "user", truncate(req.User, 64))
		select {
		case <-time.After(failDelay):
		case <-r.Context().Done():
		}
		httpError(w, http.StatusUnauthorized, "wrong user name or password")
		return
	}
	s, err := c.open(req.User, req.Password, pattern)
	if err != nil {
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.id, Path: "/", HttpOnly: true, Secure: c.cfg.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(c.cfg.SessionLifetime / time.Second)})
	c.log.Info("console: logged in", "user", s.user, "remote", r.RemoteAddr)
	writeJSON(w, sessionReply{User: s.user, Admin: s.admin(), Token: s.token})
}

// refusedFor returns how long addr is still refused, or 0.
func (c *Console) refusedFor(addr string, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.failures[addr]
	if f == nil {
		if len(c.failures) >= maxFailureAddrs {
			c.forgetFailuresLocked(now)
			if len(c.failures) >= maxFailureAddrs {
				return c.cfg.LoginWindow
			}
		}
		return 0
	}
	if now.Sub(f.start) >= c.cfg.LoginWindow {
		delete(c.failures, addr)
		return 0
	}
	if f.n >= c.cfg.LoginFailures {
		return c.cfg.LoginWindow - now.Sub(f.start)
	}
	return 0
}

func (c *Console) failed(addr string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.failures[addr]
	if f == nil {
		f = &failures{start: now}
		c.failures[addr] = f
	}
	f.n++
}

func (c *Console) forgetFailuresLocked(now time.Time) {
	for a, f := range c.failures {
		if now.Sub(f.start) >= c.cfg.LoginWindow {
			delete(c.failures, a)
		}
	}
}

// open starts a session for user, within the limits.
func (c *Console) open(user, password, pattern string) (*session, error) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("the console is shutting down")
	}
	c.expireLocked(now)
	mine := 0
	for _, s := range c.sessions {
		if s.user == user {
			mine++
		}
	}
	switch {
	case len(c.sessions) >= c.cfg.MaxSessions:
		return nil, fmt.Errorf("the console has its maximum of %d sessions open; log out elsewhere or wait for one to end", c.cfg.MaxSessions)
	case mine >= c.cfg.MaxUserSessions:
		return nil, fmt.Errorf("user %s has its maximum of %d console sessions open; log out of one first", user, c.cfg.MaxUserSessions)
	}
	ctx, end := context.WithCancel(context.Background())
	s := &session{id: randomHex(), token: randomHex(), user: user, pattern: pattern, created: now, lastUsed: now, ctx: ctx, end: end,
		rdb: redis.NewClient(&redis.Options{Addr: c.cfg.NodeAddr, Username: user, Password: password, TLSConfig: c.cfg.DialTLS,
			ClientName: "fencer-console", Protocol: 3, DisableIdentity: true, PoolSize: 4, MaxRetries: -1,
			DialTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second, WriteTimeout: 5 * time.Second})}
	c.sessions[s.id] = s
	return s, nil
}

// whoami: POST /api/session → {"user","admin","token"} of the cookie's
// session (a reloaded page gets its token back).
func (c *Console) whoami(w http.ResponseWriter, _ *http.Request, s *session) {
	writeJSON(w, sessionReply{User: s.user, Admin: s.admin(), Token: s.token})
}

// logout: POST /api/logout ends the session.
func (c *Console) logout(w http.ResponseWriter, _ *http.Request, s *session) {
	c.mu.Lock()
	if c.sessions[s.id] == s {
		c.endLocked(s.id, s)
	}
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, Secure: c.cfg.Secure, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	writeJSON(w, map[string]bool{"ok": true})
}

type actionRequest struct {
	// Target is the lock (revoke) or the node ID ("" for any, transfer).
	Target string `json:"target"`
	// Confirm is the target typed again ("any" for a transfer to any node).
	Confirm string `json:"confirm"`
}

// revoke: POST /api/revoke {"target": lock, "confirm": lock} → FENCE.REVOKE
// as the user.
func (c *Console) revoke(w http.ResponseWriter, r *http.Request, s *session) {
	req, ok := c.action(w, r, false)
	if !ok {
		return
	}
	c.run(w, r, s, "revoke", req.Target, "FENCE.REVOKE", req.Target)
}

// transfer: POST /api/transfer {"target": node ID or "", "confirm": the ID
// or "any"} → FENCE.TRANSFER as the user.
func (c *Console) transfer(w http.ResponseWriter, r *http.Request, s *session) {
	req, ok := c.action(w, r, true)
	if !ok {
		return
	}
	args := []any{"FENCE.TRANSFER"}
	if req.Target != "" {
		args = append(args, req.Target)
	}
	c.run(w, r, s, "transfer", req.Target, args...)
}

// action reads an action's body and checks its confirmation.
func (c *Console) action(w http.ResponseWriter, r *http.Request, anyTarget bool) (actionRequest, bool) {
	bodyDeadline(w)
	var req actionRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 8192)).Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "want a JSON body {\"target\": ..., \"confirm\": ...}")
		return req, false
	}
	want := req.Target
	if anyTarget && want == "" {
		want = "any"
	}
	if want == "" || req.Confirm != want {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("not confirmed: type %q to confirm", want))
		return req, false
	}
	return req, true
}

// run sends one administrative command as s's user; the node's audit trail
// records it with the user (client name fencer-console), and the console
// logs the browser's address beside it.
func (c *Console) run(w http.ResponseWriter, r *http.Request, s *session, action, target string, args ...any) {
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	v, err := s.rdb.Do(ctx, args...).Result()
	c.log.Info("console: action", "action", action, "target", truncate(target, 128), "user", s.user, "remote", r.RemoteAddr, "err", errString(err))
	if err != nil {
		httpError(w, http.StatusBadGateway, err.Error())
		return
	}
	writeJSON(w, map[string]any{"ok": true, "reply": jsonable(v)})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// remoteHost is r's client address without its port.
func remoteHost(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}

// bodyDeadline bounds the reading of a request's body (the server has no
// ReadTimeout: it would end the feeds, which read nothing).
func bodyDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(10 * time.Second))
}

func randomHex() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// jsonable turns a RESP3 reply as go-redis reads it (maps keyed by any)
// into values encoding/json writes.
func jsonable(v any) any {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[fmt.Sprint(k)] = jsonable(x)
		}
		return m
	case []any:
		for i, x := range v {
			v[i] = jsonable(x)
		}
		return v
	case error:
		return map[string]string{"error": v.Error()}
	}
	return v
}

// isPrefixOK reports whether a prefix from the page is acceptable.
func isPrefixOK(p string) bool { return len(p) <= 1024 && !strings.ContainsAny(p, "\r\n") }
