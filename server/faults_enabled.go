//go:build fencer_faults

package server

import (
	"os"
	"strings"
)

// Deliberate bugs, switched on by name in the FENCER_FAULTS environment
// variable (comma-separated), in binaries built with -tags fencer_faults. They
// let the fault campaign show that its checkers catch real violations.
const (
	// faultSkipLeaseRestart: a new leader does not restart every lease at
	// its full TTL, and followers record no deadlines, so a new leader
	// treats every inherited lease as run out and frees it early (breaks
	// "no early expiry").
	faultSkipLeaseRestart = "skip-lease-restart"
	// faultStaleReads: reads are answered from the local table without
	// confirming leadership or forwarding (breaks "linearizable reads").
	faultStaleReads = "stale-reads"
)

var activeFaults = strings.Split(os.Getenv("FENCER_FAULTS"), ",")

func faultActive(name string) bool {
	for _, f := range activeFaults {
		if f == name {
			return true
		}
	}
	return false
}
