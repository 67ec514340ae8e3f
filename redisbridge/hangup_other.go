//go:build !linux

package redisbridge

// mayHaveClosed marks every connection suspect where poll(2) cannot report
// a peer's FIN (POLLRDHUP is Linux's); peerClosed then peeks at each.
func mayHaveClosed(_ []int, suspect []bool) {
	for i := range suspect {
		suspect[i] = true
	}
}
