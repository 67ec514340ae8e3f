package fence

import (
	"errors"
	"fmt"
)

// Errors returned by this package's validators.
var (
	// ErrStaleToken means a write was refused because its token is lower
	// than one already admitted for the same resource: the writer's lease
	// has passed to someone else. The error is a *StaleTokenError that
	// carries both numbers.
	ErrStaleToken = errors.New("fence: stale token")
)

// StaleTokenError reports a refused write: Token is the token it carried,
// Highest the highest token already admitted for Resource (Highest > Token).
// errors.Is(err, ErrStaleToken) is true for it.
type StaleTokenError struct {
	Resource string
	Token    uint64
	Highest  uint64
}

// Error names the resource and both tokens.
func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fence: stale token %d for %q: token %d was already admitted", e.Token, e.Resource, e.Highest)
}

// Unwrap makes errors.Is(err, ErrStaleToken) true.
func (e *StaleTokenError) Unwrap() error { return ErrStaleToken }

// Check is the fencing rule: a write carrying token to a resource whose
// highest admitted token is highest is admitted (nil) if token >= highest,
// and refused with a *StaleTokenError otherwise. A resource that never
// admitted a write has highest 0, so every token is admitted there.
func Check(resource string, token, highest uint64) error {
	if token < highest {
		return &StaleTokenError{Resource: resource, Token: token, Highest: highest}
	}
	return nil
}
