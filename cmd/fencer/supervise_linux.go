package main

import (
	"syscall"
	"unsafe"
)

// waitExited returns true when the process pid has exited, without reaping it:
// until it is reaped, its pid (the id of its process group) cannot be
// reused, so a signal to the group cannot reach a stranger.
func waitExited(pid int) bool {
	const pPID = 1     // P_PID
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info)),
			syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return errno == 0
		}
	}
}
