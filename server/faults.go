//go:build !fencer_faults

package server

// faultActive reports whether a deliberate bug is switched on. Faults exist
// only in binaries built with -tags fencer_faults, for the fault campaign's
// sensitivity tests (integration/chaos); this build has none.
func faultActive(string) bool { return false }
