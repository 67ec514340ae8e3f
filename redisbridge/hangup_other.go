//go:build !linux

package redisbridge

// pollSockets marks every socket suspect where poll(2) cannot report a
// peer's FIN (POLLRDHUP is Linux's); peerClosed then peeks at each. A TLS
// client's hang-up, whose close_notify alert is left unread in front of the
// FIN, then looks like a live client until its wait ends.
func pollSockets(_ []int, state []int) {
	for i := range state {
		state[i] = sockSuspect
	}
}
