//go:build fencer_faults

package fsm

import (
	"fmt"
	"os"
	"strconv"
)

// In a binary built with -tags fencer_faults, FENCER_RELEASE_MEMORY_WINDOW
// and FENCER_RELEASE_MEMORY_MAX lower the release memory's bounds, so that
// the soak (integration/chaos) sees the memory reach its bound and stay
// there within one run instead of after millions of commands. They are read
// from the environment, not taken as flags, and only in this build: every
// node must forget at the same log position, so a shipped fencerd keeps the
// constants, and the soak starts every node with the same environment.
func init() {
	if v, ok := positiveEnv("FENCER_RELEASE_MEMORY_WINDOW"); ok {
		releaseMemoryWindow = v
	}
	if v, ok := positiveEnv("FENCER_RELEASE_MEMORY_MAX"); ok {
		releaseMemoryMax = int(v)
	}
}

// positiveEnv reads a positive integer from the environment variable name;
// ok is false if it is unset. Any other value stops the process: a node
// that silently kept the constants would forget at other positions than its
// peers.
func positiveEnv(name string) (v uint64, ok bool) {
	s := os.Getenv(name)
	if s == "" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 31)
	if err != nil || v == 0 {
		panic(fmt.Sprintf("fsm: %s=%q: want a positive integer below 2^31", name, s))
	}
	return v, true
}
