package fencehttp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence"
	"github.com/fencerlock/fencer/fence/fencehttp"
	"github.com/fencerlock/fencer/internal/fencetest"
)

// store is a protected resource behind the middleware: a document per path,
// and the tokens of the writes that reached it, in the order they landed.
type store struct {
	mu      sync.Mutex
	docs    map[string]string
	landed  []uint64
	entered chan string // if set, told each request's token as its handler starts
}

func (s *store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, ok := fence.TokenFrom(r.Context())
	if !ok {
		http.Error(w, "handler got no token in its context", http.StatusInternalServerError)
		return
	}
	if s.entered != nil {
		s.entered <- strconv.FormatUint(token, 10)
	}
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[r.URL.Path] = string(body)
	s.landed = append(s.landed, token)
	w.WriteHeader(http.StatusNoContent)
}

func byPath(r *http.Request) string { return r.URL.Path }

// startStore serves a fenced store on a loopback port.
func startStore(t *testing.T, opts ...fencehttp.Option) (*store, *httptest.Server) {
	t.Helper()
	s := &store{docs: map[string]string{}}
	srv := httptest.NewServer(fencehttp.Middleware(fence.NewMemory(), byPath, opts...)(s))
	t.Cleanup(srv.Close)
	return s, srv
}

// put sends body to url with the given Fencing-Token header values and
// returns the status and the response body.
func put(t *testing.T, c *http.Client, url, body string, tokens ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range tokens {
		req.Header.Add(fencehttp.Header, tok)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMiddleware(t *testing.T) {
	s, srv := startStore(t)
	steps := []struct {
		name     string
		path     string
		tokens   []string
		wantCode int
		wantBody string // substring
	}{
		{"no header", "/a", nil, 400, "missing Fencing-Token header"},
		{"not a number", "/a", []string{"abc"}, 400, `"abc" is not an unsigned decimal integer`},
		{"negative", "/a", []string{"-1"}, 400, "invalid Fencing-Token"},
		{"plus sign", "/a", []string{"+5"}, 400, "invalid Fencing-Token"},
		{"two headers", "/a", []string{"5", "6"}, 400, "2 values"},
		{"first holder", "/a", []string{"5"}, 204, ""},
		{"same holder again", "/a", []string{"5"}, 204, ""},
		{"stale holder", "/a", []string{"4"}, 409, `fence: stale token 4 for "/a": token 5 was already admitted`},
		{"other resource is independent", "/b", []string{"1"}, 204, ""},
		{"newer holder", "/a", []string{"7"}, 204, ""},
		{"previous holder is now stale", "/a", []string{"5"}, 409, "token 7 was already admitted"},
	}
	for i, st := range steps {
		code, body := put(t, srv.Client(), srv.URL+st.path, fmt.Sprint("v", i), st.tokens...)
		if code != st.wantCode || !strings.Contains(body, st.wantBody) {
			t.Errorf("%s: got %d %q, want %d with %q", st.name, code, body, st.wantCode, st.wantBody)
		}
	}
	if s.docs["/a"] != "v9" || s.docs["/b"] != "v8" {
		t.Errorf("store holds %v, want /a=v9 (token 7), /b=v8", s.docs)
	}
	if fmt.Sprint(s.landed) != "[5 5 1 7]" {
		t.Errorf("writes landed with tokens %v, want [5 5 1 7]", s.landed)
	}
}

func TestMiddlewareBadTokenHandler(t *testing.T) {
	var got error
	s, srv := startStore(t, fencehttp.WithBadToken(func(w http.ResponseWriter, r *http.Request, err error) {
		got = err
		http.Error(w, "token required", http.StatusUnauthorized)
	}))
	code, body := put(t, srv.Client(), srv.URL+"/a", "x")
	if code != http.StatusUnauthorized || body != "token required\n" || !errors.Is(got, fencehttp.ErrMissingToken) {
		t.Errorf("missing token: %d %q, handler saw %v", code, body, got)
	}
	put(t, srv.Client(), srv.URL+"/a", "x", "0x10")
	if !errors.Is(got, fencehttp.ErrInvalidToken) {
		t.Errorf("invalid token: handler saw %v", got)
	}
	if len(s.landed) != 0 {
		t.Errorf("writes without a valid token landed: %v", s.landed)
	}
}

func TestTransport(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, strings.Join(r.Header.Values(fencehttp.Header), ","))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	var lease uint64 = 41
	withSource := &http.Client{Transport: &fencehttp.Transport{
		Base:   srv.Client().Transport,
		Source: fencehttp.TokenFunc(func() uint64 { return lease }),
	}}
	bare := &http.Client{Transport: &fencehttp.Transport{Base: srv.Client().Transport}}

	send := func(c *http.Client, ctx context.Context, header string) *http.Request {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("body"))
		if header != "" {
			req.Header.Set(fencehttp.Header, header)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return req
	}
	ctx := context.Background()
	req := send(withSource, ctx, "")
	if req.Header.Get(fencehttp.Header) != "" {
		t.Error("Transport modified the caller's request")
	}
	lease = 42
	send(withSource, ctx, "")
	send(withSource, fence.WithToken(ctx, 7), "")
	send(withSource, ctx, "99")
	send(bare, ctx, "")
	send(bare, fence.WithToken(ctx, 8), "")
	want := []string{"41", "42", "7", "99", "", "8"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("server saw Fencing-Token %q, want %q", seen, want)
	}
}

// TestConcurrentInterleavedTokens: holders with tokens 1..n write to one
// path at once through their own Transport. The writes that land are in
// token order; the newest holder is never refused; every refusal is a 409.
func TestConcurrentInterleavedTokens(t *testing.T) {
	const holders, writes = 8, 25
	s, srv := startStore(t)
	clients := make([]*http.Client, holders+1)
	for h := 1; h <= holders; h++ {
		clients[h] = &http.Client{Transport: &fencehttp.Transport{
			Base:   srv.Client().Transport,
			Source: fencehttp.TokenFunc(func() uint64 { return uint64(h) }),
		}, Timeout: 30 * time.Second}
	}
	refused := fencetest.Writers(t, holders, writes, func(token uint64, i int) (bool, error) {
		resp, err := clients[token].Post(srv.URL+"/doc", "text/plain", strings.NewReader(fmt.Sprintf("h%d-%d", token, i)))
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusNoContent:
			return false, nil
		case http.StatusConflict:
			return true, nil
		}
		return false, fmt.Errorf("status %d", resp.StatusCode)
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	fencetest.CheckHistory(t, refused, holders, writes, s.landed)
	if !strings.HasPrefix(s.docs["/doc"], fmt.Sprintf("h%d-", holders)) {
		t.Errorf("store holds %q, want a write of holder %d", s.docs["/doc"], holders)
	}
}

// stalledPut starts a PUT with the given token and a 10-byte body on a raw
// connection, sends 3 bytes of the body and stops, as a paused client
// would. finish sends the rest and returns the status line.
func stalledPut(t *testing.T, srv *httptest.Server, token string) (finish func() string) {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := "PUT /a HTTP/1.1\r\nHost: store\r\nFencing-Token: " + token + "\r\nContent-Length: 10\r\n\r\nsta"
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	return func() string {
		if _, err := io.WriteString(c, "lled!!!"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stalled request's response: %v", err)
		}
		return strings.TrimSpace(line)
	}
}

// TestStalledUploadHoldsNobody: a request whose body stalls has not taken
// its turn, so a newer holder's request goes through; when the stalled body
// arrives, its token is checked then, and refused.
func TestStalledUploadHoldsNobody(t *testing.T) {
	s, srv := startStore(t)
	finish := stalledPut(t, srv, "1")
	code, body := put(t, srv.Client(), srv.URL+"/a", "from holder 2", "2")
	if code != http.StatusNoContent {
		t.Fatalf("newer holder: %d %q", code, body)
	}
	if got := finish(); got != "HTTP/1.1 409 Conflict" {
		t.Errorf("stalled stale request answered %q, want 409", got)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.docs["/a"] != "from holder 2" {
		t.Errorf("store holds %q", s.docs["/a"])
	}
}

// TestUnbufferedBodyHoldsTheResource shows what WithMaxBody(-1) costs: a
// request whose body stalls inside the handler holds the resource's turn,
// and the next request for it waits.
func TestUnbufferedBodyHoldsTheResource(t *testing.T) {
	s, srv := startStore(t, fencehttp.WithMaxBody(-1))
	s.entered = make(chan string, 1)
	finish := stalledPut(t, srv, "1")
	if tok := <-s.entered; tok != "1" {
		t.Fatalf("handler entered with token %s", tok)
	}
	second := make(chan int, 1)
	go func() {
		code, _ := put(t, srv.Client(), srv.URL+"/a", "from holder 2", "2")
		second <- code
	}()
	select {
	case code := <-second:
		t.Fatalf("the second request finished (%d) while the first held the resource", code)
	case <-time.After(300 * time.Millisecond):
	}
	if got := finish(); got != "HTTP/1.1 204 No Content" {
		t.Errorf("stalled request answered %q, want 204", got)
	}
	if tok := <-s.entered; tok != "2" {
		t.Fatalf("handler entered with token %s", tok)
	}
	if code := <-second; code != http.StatusNoContent {
		t.Errorf("second request: %d", code)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.docs["/a"] != "from holder 2" || fmt.Sprint(s.landed) != "[1 2]" {
		t.Errorf("store holds %q, landed %v", s.docs["/a"], s.landed)
	}
}

func TestBodyTooLarge(t *testing.T) {
	s, srv := startStore(t, fencehttp.WithMaxBody(10))
	if code, body := put(t, srv.Client(), srv.URL+"/a", "0123456789", "1"); code != http.StatusNoContent {
		t.Fatalf("10 bytes: %d %q", code, body)
	}
	if code, body := put(t, srv.Client(), srv.URL+"/a", "0123456789!", "1"); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "over 10 bytes") {
		t.Errorf("11 bytes: %d %q, want 413", code, body)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.docs["/a"] != "0123456789" {
		t.Errorf("store holds %q", s.docs["/a"])
	}
}
