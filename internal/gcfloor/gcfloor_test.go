package gcfloor

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestPercentFor(t *testing.T) {
	assert.Equal(t, 100, percentFor(64<<20, 32<<20), "half the floor live: the default")
	assert.Equal(t, 100, percentFor(64<<20, 100<<20), "above the floor: the default")
	assert.Equal(t, 1500, percentFor(64<<20, 4<<20), "goal 4 MiB × 16 = 64 MiB")
	assert.Equal(t, 300, percentFor(64<<20, 16<<20))
	assert.Equal(t, 6300, percentFor(64<<20, 0), "nothing measured yet: counted as 1 MiB")
}

// Keep raises GOGC after collections while the live heap is small, and stop
// gives the default back. (The test binary's live heap is a few MiB.)
func TestKeepRaisesGOGCWhileTheHeapIsSmall(t *testing.T) {
	t.Setenv("GOGC", "") // as if unset
	require.Equal(t, uint64(100), gogc())
	stop := Keep(1 << 30)
	for range 3 {
		runtime.GC()
	}
	require.Eventually(t, func() bool { runtime.GC(); return gogc() > 1000 }, 5*time.Second, 10*time.Millisecond)
	stop()
	assert.Equal(t, uint64(100), gogc())
	assert.Never(t, func() bool { runtime.GC(); return gogc() != 100 }, 300*time.Millisecond, 10*time.Millisecond,
		"stopped: collections leave GOGC alone")
}

func TestKeepLeavesAnOperatorsGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	stop := Keep(1 << 30)
	defer stop()
	assert.Never(t, func() bool { runtime.GC(); return gogc() != 100 }, 300*time.Millisecond, 10*time.Millisecond)
}
