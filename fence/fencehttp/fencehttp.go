package fencehttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/fencerlock/fencer/fence"
)

// Header is the request header that carries a fencing token, in decimal.
const Header = "Fencing-Token"

// Errors passed to the bad-token handler (see WithBadToken).
var (
	// ErrMissingToken means the request has no Fencing-Token header.
	ErrMissingToken = errors.New("fencehttp: missing Fencing-Token header")
	// ErrInvalidToken means the Fencing-Token header is not one unsigned
	// decimal integer.
	ErrInvalidToken = errors.New("fencehttp: invalid Fencing-Token header")
)

// ParseToken returns the token in h's Fencing-Token header, or an error
// wrapping ErrMissingToken or ErrInvalidToken.
func ParseToken(h http.Header) (uint64, error) {
	vs := h.Values(Header)
	switch len(vs) {
	case 0:
		return 0, ErrMissingToken
	case 1:
	default:
		return 0, fmt.Errorf("%w: %d values", ErrInvalidToken, len(vs))
	}
	t, err := strconv.ParseUint(vs[0], 10, 64)
	if err != nil || vs[0][0] == '+' {
		return 0, fmt.Errorf("%w: %q is not an unsigned decimal integer", ErrInvalidToken, vs[0])
	}
	return t, nil
}

// DefaultMaxBody is how much of a request body Middleware reads before the
// request takes its turn, unless WithMaxBody says otherwise.
const DefaultMaxBody = 1 << 20

// config is what the Options set.
type config struct {
	badToken func(w http.ResponseWriter, r *http.Request, err error)
	maxBody  int64
}

// Option configures Middleware.
type Option func(*config)

// WithBadToken sets what answers a request whose token is missing or
// invalid; err wraps ErrMissingToken or ErrInvalidToken. The default answers
// 400 Bad Request with err's text. To let such requests through unfenced
// (only where writes without a token are acceptable), pass a function that
// calls the next handler.
func WithBadToken(h func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(c *config) { c.badToken = h }
}

// WithMaxBody sets how many bytes of a request body Middleware reads before
// the request takes its turn at the resource. Reading first means that a
// client that stalls in mid-upload (paused, or behind a slow link) holds up
// nobody: the resource is held only while the handler runs on a body
// already in memory. A longer body gets 413 Request Entity Too Large. The
// default is DefaultMaxBody (1 MiB). n < 0 turns the reading off: the
// handler then reads the body during its turn, and a stalled client holds
// the resource until the server's ReadTimeout ends its request.
func WithMaxBody(n int64) Option {
	return func(c *config) { c.maxBody = n }
}

// Middleware returns middleware that admits each request through v, for the
// resource that resource names and the token in its Fencing-Token header.
//
// The next handler runs inside v.Admit, so requests for one resource are
// handled one at a time, and the token becomes the resource's highest once
// the handler returns (the handler cannot veto that: a request that reached
// it carried the current holder's token). The handler finds the token in
// its request's context (fence.TokenFrom), to pass on to storage that checks
// tokens itself.
//
// The request body is read before the request takes its turn (see
// WithMaxBody).
//
// A stale token gets 409 Conflict and a text body naming both tokens, for
// example
//
//	fence: stale token 33 for "/docs/a": token 34 was already admitted
//
// A context that ends before the request's turn gets 503 Service
// Unavailable; the handler did not run.
func Middleware(v fence.Validator, resource func(*http.Request) string, opts ...Option) func(http.Handler) http.Handler {
	c := config{
		badToken: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadRequest)
		},
		maxBody: DefaultMaxBody,
	}
	for _, o := range opts {
		o(&c)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, err := ParseToken(r.Header)
			if err != nil {
				c.badToken(w, r, err)
				return
			}
			if c.maxBody >= 0 && r.Body != nil && r.Body != http.NoBody {
				body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, c.maxBody))
				var tooLarge *http.MaxBytesError
				switch {
				case errors.As(err, &tooLarge):
					http.Error(w, fmt.Sprintf("fencehttp: request body over %d bytes", c.maxBody), http.StatusRequestEntityTooLarge)
					return
				case err != nil:
					http.Error(w, "fencehttp: reading request body: "+err.Error(), http.StatusBadRequest)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			err = v.Admit(r.Context(), resource(r), token, func(ctx context.Context) error {
				next.ServeHTTP(w, r.WithContext(fence.WithToken(ctx, token)))
				return nil
			})
			var stale *fence.StaleTokenError
			switch {
			case err == nil:
			case errors.As(err, &stale):
				http.Error(w, stale.Error(), http.StatusConflict)
			default:
				http.Error(w, "fencehttp: request not admitted: "+err.Error(), http.StatusServiceUnavailable)
			}
		})
	}
}

// TokenSource is what holds a fencing token: a lease, a lock handle. Token
// returns the token of the grant the holder has.
type TokenSource interface {
	Token() uint64
}

// TokenFunc makes a function a TokenSource.
type TokenFunc func() uint64

// Token calls f.
func (f TokenFunc) Token() uint64 { return f() }

// Transport is an http.RoundTripper that puts a fencing token in the
// Fencing-Token header of each request it sends: the token in the request's
// context (fence.WithToken) if there is one, else Source's. A request that
// already has the header, or that has no token from either (Source nil),
// is sent as it is.
type Transport struct {
	// Base sends the requests. The default is http.DefaultTransport.
	Base http.RoundTripper
	// Source gives the token of the lease the client holds. It may be nil
	// if every fenced request carries its token in its context.
	Source TokenSource
}

// RoundTrip implements http.RoundTripper. It does not modify req: a request
// that needs the header is cloned.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.Header.Get(Header) != "" {
		return base.RoundTrip(req)
	}
	token, ok := fence.TokenFrom(req.Context())
	if !ok && t.Source != nil {
		token, ok = t.Source.Token(), true
	}
	if !ok {
		return base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set(Header, strconv.FormatUint(token, 10))
	return base.RoundTrip(r)
}
