//go:build linux

package chaos

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Workload 2: short leases on four contended keys. A grant is released, or
// extended once, or simply left to expire; half of the acquires queue with
// WAIT, so that they are granted the moment the lease before them ends,
// which makes the early-expiry check tight.
const (
	expiryTTL  = 1200 * time.Millisecond
	expiryWait = 3 * time.Second
	expiryKeys = 4
)

// expiryWorkload is workload 2; its grants go to the shared log.
type expiryWorkload struct {
	grants *grantLog
}

func (w *expiryWorkload) run(cl *client, stop <-chan struct{}) {
	for !stopped(stop) {
		key := fmt.Sprintf("exp-%d", cl.rng.IntN(expiryKeys))
		owner := cl.owner()
		var wait []string
		timeout := clientTimeout
		if cl.rng.IntN(2) == 0 {
			wait = []string{"WAIT", ms(expiryWait)}
			timeout += expiryWait
		}
		if g, granted := cl.acquire("early-expiry", key, owner, expiryTTL, timeout, wait...); granted {
			w.use(cl, &g)
			w.grants.add(g)
		}
		cl.think()
	}
}

// use does one of three things with a grant: release it before its TTL,
// extend it once and let it expire, or let it expire.
func (w *expiryWorkload) use(cl *client, g *grant) {
	switch r := cl.rng.IntN(10); {
	case r < 4:
		time.Sleep(time.Duration(cl.rng.Int64N(int64(expiryTTL) * 8 / 10)))
		releaseUntilKnown(cl, g.key, g.owner, g)
	case r < 6:
		time.Sleep(time.Duration(cl.rng.Int64N(int64(expiryTTL) / 2)))
		v, out, call, _ := cl.do(clientTimeout, "FENCE.EXTEND", g.key, g.owner, ms(g.ttl))
		if n, isInt := v.(int64); out == ok && isInt && n == 1 {
			g.validUntil = max(g.validUntil, call+int64(g.ttl))
		}
		time.Sleep(expiryTTL / 2)
	default:
		time.Sleep(expiryTTL / 2)
	}
}

// acquire sends FENCE.ACQUIRE key owner ttl (then extra, such as WAIT)
// within timeout and returns the grant if one was acknowledged. An unknown
// outcome is released until known; a refusal or an odd reply (counted)
// returns false.
func (cl *client) acquire(workload, key, owner string, ttl, timeout time.Duration, extra ...string) (grant, bool) {
	v, out, call, ret := cl.do(timeout, append([]string{"FENCE.ACQUIRE", key, owner, ms(ttl)}, extra...)...)
	switch out {
	case unknown:
		releaseUntilKnown(cl, key, owner, nil)
	case ok:
		tok, granted, err := asGrant(v)
		if err != nil {
			cl.count.odd("FENCE.ACQUIRE", v)
		}
		if err == nil && granted {
			return grant{workload: workload, key: key, owner: owner, token: tok, ttl: ttl,
				call: call, ret: ret, validUntil: call + int64(ttl)}, true
		}
	}
	return grant{}, false
}

// releaseUntilKnown sends RELEASE until its outcome is known, as
// releaseUntilKnownBy does.
func releaseUntilKnown(cl *client, key, owner string, g *grant) {
	releaseUntilKnownBy(cl, g, "FENCE.RELEASE", key, owner)
}

// releaseUntilKnownBy sends args, a release, until its outcome is known,
// for at most 30 s. If g is set, it records when the first attempt that may
// have taken effect was sent.
func releaseUntilKnownBy(cl *client, g *grant, args ...string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, out, call, _ := cl.do(clientTimeout, args...)
		if g != nil && g.released == 0 && out != failed {
			g.released = call
		}
		if out == ok {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkEarlyExpiry checks invariants 2 and 3 from the clients' side, on
// every grant of every workload: a grant of a key to another owner never
// returns before an earlier grant's validUntil (its ACQUIRE's call time
// plus TTL, or an acknowledged EXTEND's), unless the earlier grant's owner
// had sent a RELEASE before the later grant returned. Earlier means a
// smaller token.
func checkEarlyExpiry(grants []grant) checkResult {
	res := checkResult{name: "no early expiry", checked: len(grants)}
	byKey := make(map[string][]grant)
	for _, g := range grants {
		byKey[g.key] = append(byKey[g.key], g)
	}
	closest := int64(math.MaxInt64) // smallest margin seen on a lease that expired
	for _, gs := range byKey {
		sort.Slice(gs, func(i, j int) bool { return gs[i].token < gs[j].token })
		for j := range gs {
			for i := range j {
				a, b := gs[i], gs[j]
				if a.token == b.token || a.owner == b.owner || a.released <= b.ret {
					continue
				}
				margin := b.ret - a.validUntil
				if margin < 0 {
					res.violations = append(res.violations, fmt.Sprintf(
						"%s: %s got token %d at +%v, %v before the lease of %s (token %d, TTL %v, acquire sent at +%v) could end at +%v; it was not released",
						b.key, b.owner, b.token, time.Duration(b.ret), time.Duration(-margin), a.owner, a.token, a.ttl,
						time.Duration(a.call), time.Duration(a.validUntil)))
				}
				if a.ttl < time.Minute {
					closest = min(closest, margin)
				}
			}
		}
	}
	if closest != math.MaxInt64 {
		res.notes = append(res.notes, fmt.Sprintf("closest later grant after an expired lease: %v after its bound", time.Duration(closest).Round(time.Microsecond)))
	}
	return res
}
