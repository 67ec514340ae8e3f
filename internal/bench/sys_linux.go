package bench

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data to the disk, as a write-ahead log commits.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// childAttr puts a child in a process group of its own and has the kernel
// send it SIGTERM if the harness dies, so that no node outlives a run.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
