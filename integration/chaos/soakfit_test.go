package chaos

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The soak's growth check (soak_test.go): a straight line fitted by least
// squares to the second half of each node's series of each metric. A
// structure that is bounded has reached its bound by then and the line is
// flat; one that leaks keeps climbing. The check fails a series whose
// fitted growth over that half exceeds its tolerance: a fraction of the
// series' mean, or an absolute floor under which a change is noise
// (docs/operations.md, Soak, gives the numbers and why).

// tolerance is how much a series may grow over the second half.
type tolerance struct {
	rel   float64 // of the mean over the second half
	floor float64 // in the series' unit
}

// of returns the tolerance for a series with that mean.
func (tl tolerance) of(mean float64) float64 { return max(tl.rel*math.Abs(mean), tl.floor) }

// minFitSamples is how few samples in the second half still make a fit.
const minFitSamples = 5

// growth is the fit of one series over its second half.
type growth struct {
	samples   int     // used (NaN values are skipped)
	mean      float64 // over those samples
	tMean     float64 // their mean time in hours: the line passes through (tMean, mean)
	perHour   float64 // the fitted slope, per hour
	grown     float64 // the fitted growth from the first sample used to the last
	tolerance float64
}

// ok reports whether the series stayed within its tolerance; a series with
// too few samples to fit passes.
func (g growth) ok() bool { return g.samples < minFitSamples || g.grown <= g.tolerance }

// verdict names the outcome for the summary.
func (g growth) verdict() string {
	switch {
	case g.samples < minFitSamples:
		return "too few samples"
	case g.ok():
		return "ok"
	}
	return "GROWS"
}

// fitGrowth fits y = a + b·t to the points at or after from, NaN values
// left out, and judges the growth b·(t_last − t_first) against tol.
func fitGrowth(ts []time.Duration, ys []float64, from time.Duration, tol tolerance) growth {
	var n, st, sy, stt, sty float64
	first, last := time.Duration(-1), time.Duration(0)
	for i, t := range ts {
		y := ys[i]
		if t < from || math.IsNaN(y) {
			continue
		}
		if first < 0 {
			first = t
		}
		last = t
		x := t.Hours()
		n++
		st += x
		sy += y
		stt += x * x
		sty += x * y
	}
	g := growth{samples: int(n)}
	if n == 0 {
		return g
	}
	g.mean, g.tMean = sy/n, st/n
	g.tolerance = tol.of(g.mean)
	if den := n*stt - st*st; n >= 2 && den > 0 {
		g.perHour = (n*sty - st*sy) / den
		g.grown = g.perHour * (last - first).Hours()
	}
	return g
}

// TestSoakGrowth: the verdict on made-up series sampled every 10 s for an
// hour, with noise: flat, rising to a bound early and staying there, and
// growing without bound, against the tolerances of the soak's memory
// metric.
func TestSoakGrowth(t *testing.T) {
	const mib = 1 << 20
	tol := tolerance{rel: 0.10, floor: 32 * mib}
	rng := rand.New(rand.NewPCG(1, 2))
	series := func(f func(h float64) float64) ([]time.Duration, []float64) {
		var ts []time.Duration
		var ys []float64
		for t := time.Duration(0); t <= time.Hour; t += 10 * time.Second {
			ts = append(ts, t)
			ys = append(ys, f(t.Hours())+rng.NormFloat64()*4*mib)
		}
		return ts, ys
	}
	tests := []struct {
		name string
		f    func(h float64) float64
		ok   bool
	}{
		{"flat", func(float64) float64 { return 80 * mib }, true},
		{"flattening", func(h float64) float64 { return 40*mib + 200*mib*(1-math.Exp(-h/0.08)) }, true},
		{"triangle wave", func(h float64) float64 { return 100*mib + 60*mib*math.Abs(math.Mod(h*4, 2)-1) }, true},
		{"linear growth", func(h float64) float64 { return 80*mib + 120*mib*h }, false},
		{"slow growth above the floor", func(h float64) float64 { return 300*mib + 140*mib*h }, false},
		{"slow growth under the floor", func(h float64) float64 { return 80*mib + 40*mib*h }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, ys := series(tc.f)
			g := fitGrowth(ts, ys, 30*time.Minute, tol)
			if g.samples != 181 {
				t.Fatalf("fitted %d samples, want the 181 of the second half", g.samples)
			}
			if g.ok() != tc.ok {
				t.Errorf("ok = %v, want %v: mean %.0f MiB, %.1f MiB/h, grew %.1f MiB, tolerance %.1f MiB",
					g.ok(), tc.ok, g.mean/mib, g.perHour/mib, g.grown/mib, g.tolerance/mib)
			}
		})
	}
	t.Run("exact line", func(t *testing.T) {
		var ts []time.Duration
		var ys []float64
		for h := range 8 {
			ts = append(ts, time.Duration(h)*time.Hour)
			ys = append(ys, 1+2*float64(h))
		}
		ys[5] = math.NaN()
		// Fitted from 2h: 5, 7, 9, 13, 15 at 2, 3, 4, 6, 7 hours.
		g := fitGrowth(ts, ys, 2*time.Hour, tolerance{floor: 1})
		if g.samples != 5 || math.Abs(g.perHour-2) > 1e-9 || math.Abs(g.grown-10) > 1e-9 || math.Abs(g.mean-9.8) > 1e-9 {
			t.Errorf("got %+v, want 5 samples, 2 per hour, grown 10, mean 9.8", g)
		}
		if g.ok() || g.verdict() != "GROWS" {
			t.Errorf("growth 10 over a tolerance of 1 passed: %+v", g)
		}
	})
	t.Run("too few samples", func(t *testing.T) {
		g := fitGrowth([]time.Duration{0, time.Hour}, []float64{0, 1e12}, 0, tol)
		if !g.ok() || g.verdict() != "too few samples" {
			t.Errorf("two samples judged: %+v", g)
		}
	})
}
