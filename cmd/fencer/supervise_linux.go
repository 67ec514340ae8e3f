package main

import (
	"os"
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

// selfExecutable is the file fencer runs from, to start the shim: the
// kernel's link to it, which still works after the file was replaced (an
// upgrade while a command runs).
func selfExecutable() string {
	const self = "/proc/self/exe"
	if _, err := os.Stat(self); err == nil {
		return self
	}
	path, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return path
}

// killOnParentDeath makes the kernel SIGKILL the command when the shim's
// thread that starts it exits (runShim locks it, so when the shim dies):
// the backstop if the shim itself is killed. It reaches the command only,
// not the rest of its group.
func killOnParentDeath(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
