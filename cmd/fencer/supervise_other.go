//go:build !linux

package main

// waitExited cannot wait without reaping here: it returns false at once,
// and the caller reaps the command itself (the kill of what is left of its
// group that follows could then, in theory, reach a group that reused the
// id).
func waitExited(int) bool { return false }
