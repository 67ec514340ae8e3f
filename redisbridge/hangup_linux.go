package redisbridge

import (
	"errors"

	"golang.org/x/sys/unix"
)

// mayHaveClosed sets suspect[i] for each descriptor whose peer may have
// closed its end: one poll(2) over all of them, which reports a peer's FIN
// as POLLRDHUP even while unread bytes are pending, and a reset as POLLHUP
// or POLLERR. A descriptor of -1, or a poll that fails, is suspect.
func mayHaveClosed(fds []int, suspect []bool) {
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
			for i := range suspect {
				suspect[i] = true
			}
			return
		}
		break
	}
	for i, p := range pfds {
		suspect[i] = fds[i] < 0 || p.Revents != 0
	}
}
