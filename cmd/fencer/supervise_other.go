//go:build !linux

package main

import (
	"os"
	"syscall"
)

// waitExited cannot wait without reaping here: it returns false at once,
// and the caller reaps the command itself (the kill of what is left of its
// group that follows could then, in theory, reach a group that reused the
// id).
func waitExited(int) bool { return false }

// selfExecutable is the file fencer runs from, to start the shim.
func selfExecutable() string {
	path, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return path
}

// killOnParentDeath does nothing here: there is no parent-death signal, so
// a command whose shim is killed runs on.
func killOnParentDeath(*syscall.SysProcAttr) {}
