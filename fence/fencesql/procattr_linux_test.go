package fencesql_test

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd when the test binary dies, so that
// a test killed by its timeout leaves no server behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
