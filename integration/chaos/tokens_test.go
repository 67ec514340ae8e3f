//go:build linux

package chaos

import (
	"fmt"
	"sort"
	"time"
)

// checkTokens checks invariant 1 from the clients' side over every grant of
// every workload, all keys together (a token is derived from the log index,
// so it grows with every grant of any lock): no token is granted to two
// owners, and a grant whose ACQUIRE was sent after another grant returned
// has a larger token. restarts are the times at which every node had been
// killed and was started again; the notes show the tokens on both sides.
func checkTokens(grants []grant, restarts []int64) checkResult {
	res := checkResult{name: "tokens unique and increasing", checked: len(grants)}
	byToken := make(map[uint64]grant)
	for _, g := range grants {
		if p, seen := byToken[g.token]; seen && (p.owner != g.owner || p.key != g.key) {
			res.violations = append(res.violations, fmt.Sprintf("token %d granted twice: to %s on %s and to %s on %s",
				g.token, p.owner, p.key, g.owner, g.key))
		}
		byToken[g.token] = g
	}
	byCall := append([]grant(nil), grants...)
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].call < byCall[j].call })
	byRet := append([]grant(nil), grants...)
	sort.Slice(byRet, func(i, j int) bool { return byRet[i].ret < byRet[j].ret })
	var top grant // the largest token among the grants returned so far
	next := 0
	for _, g := range byCall {
		for next < len(byRet) && byRet[next].ret < g.call {
			if byRet[next].token > top.token {
				top = byRet[next]
			}
			next++
		}
		if top.token != 0 && g.token <= top.token && g.owner != top.owner {
			res.violations = append(res.violations, fmt.Sprintf(
				"%s got token %d on %s (sent at +%v), not above token %d that %s got on %s at +%v",
				g.owner, g.token, g.key, time.Duration(g.call), top.token, top.owner, top.key, time.Duration(top.ret)))
		}
	}
	for _, at := range restarts {
		var before, after uint64
		for _, g := range grants {
			switch {
			case g.ret < at:
				before = max(before, g.token)
			case g.call > at && (after == 0 || g.token < after):
				after = g.token
			}
		}
		if after != 0 {
			res.notes = append(res.notes, fmt.Sprintf("full restart at +%v: largest token before %d, smallest after %d",
				time.Duration(at).Round(time.Millisecond), before, after))
		}
	}
	return res
}
