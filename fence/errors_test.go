package fence_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fencerlock/fencer/fence"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name           string
		token, highest uint64
		wantStale      bool
	}{
		{"fresh resource", 1, 0, false},
		{"token zero on fresh resource", 0, 0, false},
		{"same holder writes again", 7, 7, false},
		{"newer holder", 9, 7, false},
		{"stale holder", 6, 7, true},
		{"far behind", 1, 1 << 62, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fence.Check("r", tt.token, tt.highest)
			if !tt.wantStale {
				if err != nil {
					t.Fatalf("Check(%d, %d) = %v, want nil", tt.token, tt.highest, err)
				}
				return
			}
			var stale *fence.StaleTokenError
			if !errors.As(err, &stale) {
				t.Fatalf("Check(%d, %d) = %v, want a *StaleTokenError", tt.token, tt.highest, err)
			}
			if stale.Resource != "r" || stale.Token != tt.token || stale.Highest != tt.highest {
				t.Errorf("StaleTokenError = %+v, want resource r, token %d, highest %d", *stale, tt.token, tt.highest)
			}
		})
	}
}

func TestStaleTokenErrorMatching(t *testing.T) {
	err := fmt.Errorf("saving order: %w", fence.Check("orders/7", 5, 9))
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Errorf("errors.Is(%v, ErrStaleToken) = false", err)
	}
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Token != 5 || stale.Highest != 9 {
		t.Fatalf("errors.As(%v) gave %+v", err, stale)
	}
	want := `saving order: fence: stale token 5 for "orders/7": token 9 was already admitted`
	if err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	if errors.Is(errors.New("fence: stale token"), fence.ErrStaleToken) {
		t.Error("an unrelated error with the same text matched ErrStaleToken")
	}
}
