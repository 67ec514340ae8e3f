//go:build !linux

package bench

import (
	"os"
	"syscall"
)

// fdatasync flushes f to the disk: without fdatasync, a full sync (on
// macOS, F_FULLFSYNC), so the probe reads higher than on Linux.
func fdatasync(f *os.File) error { return f.Sync() }

// childAttr puts a child in a process group of its own. Without Linux's
// parent-death signal, a child outlives a harness that is killed; Stop
// ends it otherwise.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
