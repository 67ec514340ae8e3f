//go:build !fencer_faults

package server

// faultActive reports whether a deliberate bug is switched on. Faults exist
// only in binaries built with -tags fencer_faults, for the fault campaign's
// sensitivity tests (integration/chaos); this build has none.
func faultActive(string) bool { return false }

// faultPoint is where a build with -tags fencer_faults lets a test step in
// (see faults_enabled.go); in this build it does nothing and reports false.
func faultPoint(string, any) bool { return false }

// faultAfterCommit is where a build with -tags fencer_faults may move
// leadership away after a request's entry committed; here it does nothing.
func (n *Node) faultAfterCommit() {}

// faultBeforeCommit is where a build with -tags fencer_faults may move
// leadership away after a transaction was worked out and before its entry
// is proposed; here it does nothing.
func (n *Node) faultBeforeCommit() {}
