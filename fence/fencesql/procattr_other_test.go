//go:build !linux

package fencesql_test

import "os/exec"

// dieWithParent does nothing where there is no parent-death signal: a test
// killed by its timeout leaves its server running.
func dieWithParent(*exec.Cmd) {}
