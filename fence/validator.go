package fence

import "context"

// Validator runs writes to resources under the fencing rule (see Check):
// Admit runs write only if token is at least the highest token already
// admitted for resource, and records token as the new highest if write
// succeeds. The check, the write and the record are one atomic step with
// respect to every other Admit for the same resource, so a write with a lower
// token never lands after one with a higher token.
//
// Admit returns a *StaleTokenError if the token is stale (write is not run),
// the context's error if ctx ends before the write could start, and
// otherwise what write returned.
type Validator interface {
	Admit(ctx context.Context, resource string, token uint64, write func(context.Context) error) error
}

// tokenKey is the context key under which WithToken stores a token.
type tokenKey struct{}

// WithToken returns a copy of ctx that carries token, for the code a fenced
// write passes through: fencehttp's middleware sets it for the handler it
// admits, and its Transport sends it if a request's context carries one.
func WithToken(ctx context.Context, token uint64) context.Context {
	return context.WithValue(ctx, tokenKey{}, token)
}

// TokenFrom returns the token that WithToken stored in ctx, if any.
func TokenFrom(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(tokenKey{}).(uint64)
	return t, ok
}
