package fence_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/fencerlock/fencer/fence"
	"github.com/fencerlock/fencer/internal/fencetest"
)

func TestSlotResource(t *testing.T) {
	for _, tt := range []struct {
		resource string
		slot     int
		want     string
	}{
		{"jobs", 0, "jobs#slot=0"},
		{"jobs", 17, "jobs#slot=17"},
		{"", 1, "#slot=1"},
		{"a#slot=1", 2, "a#slot=1#slot=2"},
	} {
		if got := fence.SlotResource(tt.resource, tt.slot); got != tt.want {
			t.Errorf("SlotResource(%q, %d) = %q, want %q", tt.resource, tt.slot, got, tt.want)
		}
	}
	// Distinct (resource, slot) pairs get distinct names, tricky
	// resource names included.
	seen := map[string][2]any{}
	for _, r := range []string{"a", "a#", "a#slot=", "a#slot=1", "a#slot=11", "a1", "#slot=1", ""} {
		for slot := range 12 {
			name := fence.SlotResource(r, slot)
			if prev, ok := seen[name]; ok {
				t.Fatalf("SlotResource(%q, %d) = SlotResource(%q, %d) = %q", r, slot, prev[0], prev[1], name)
			}
			seen[name] = [2]any{r, slot}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("SlotResource with slot -1 did not panic")
		}
	}()
	fence.SlotResource("jobs", -1)
}

// TestSemaphoreSlotFencing: a semaphore of 3 permits fenced per slot with
// the plain validator. The holder of slot 1 (token 10) pauses; its permit
// expires and slot 1 goes to a new holder (token 15), who writes. The paused
// holder wakes and is refused, while the holders of slots 0 and 2 (tokens
// 12 and 13, granted before 15, holding all along) are admitted, before and
// after, although 15 is higher than their tokens.
func TestSemaphoreSlotFencing(t *testing.T) {
	ctx := context.Background()
	v := fence.NewMemory()
	var landed []uint64
	write := func(slot int, token uint64) error {
		return v.Admit(ctx, fence.SlotResource("jobs", slot), token, func(context.Context) error {
			landed = append(landed, token)
			return nil
		})
	}
	for _, st := range []struct {
		slot      int
		token     uint64
		staleOver uint64
	}{
		{1, 10, 0}, // slot 1's first holder, then it pauses
		{0, 12, 0},
		{2, 13, 0},
		{1, 15, 0},  // slot 1 passed on
		{1, 10, 15}, // the paused holder wakes
		{0, 12, 0},
		{2, 13, 0},
		{1, 15, 0},
		{1, 10, 15},
	} {
		err := write(st.slot, st.token)
		if st.staleOver == 0 {
			if err != nil {
				t.Fatalf("slot %d, token %d: %v", st.slot, st.token, err)
			}
			continue
		}
		fencetest.WantStale(t, err, fence.SlotResource("jobs", st.slot), st.token, st.staleOver)
	}
	if want := "[10 12 13 15 12 13 15]"; fmt.Sprint(landed) != want {
		t.Errorf("landed %v, want %s", landed, want)
	}
	for slot, want := range []uint64{12, 15, 13} {
		if h, ok := v.Highest(fence.SlotResource("jobs", slot)); !ok || h != want {
			t.Errorf("slot %d: Highest = %d, %v; want %d", slot, h, ok, want)
		}
	}
	// Fenced as one resource, the same history refuses slots 0 and 2.
	whole := fence.NewMemory()
	noop := func(context.Context) error { return nil }
	for _, tok := range []uint64{10, 12, 13, 15} {
		if err := whole.Admit(ctx, "jobs", tok, noop); err != nil {
			t.Fatal(err)
		}
	}
	fencetest.WantStale(t, whole.Admit(ctx, "jobs", 12, noop), "jobs", 12, 15)
}
