package redisbridge

import (
	"errors"

	"golang.org/x/sys/unix"
)

// pollSockets sets state[i] for each descriptor, with one poll(2) over all
// of them: sockFIN for POLLRDHUP (the peer's FIN, reported even while
// unread bytes are pending); sockSuspect for any other event (POLLHUP,
// POLLERR: a reset or an error), for a closed descriptor (POLLNVAL, or -1),
// and for all of them if the poll fails.
func pollSockets(fds []int, state []int) {
	pfds := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLRDHUP}
	}
	for {
		_, err := unix.Poll(pfds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			for i := range state {
				state[i] = sockSuspect
			}
			return
		}
		break
	}
	for i, p := range pfds {
		switch {
		case fds[i] < 0 || p.Revents&unix.POLLNVAL != 0:
			state[i] = sockSuspect
		case p.Revents&unix.POLLRDHUP != 0:
			state[i] = sockFIN
		case p.Revents != 0:
			state[i] = sockSuspect
		default:
			state[i] = sockQuiet
		}
	}
}
