package server

// The names of the faults of a build with -tags fencer_faults
// (faults_enabled.go) that code of every build stands beside: it names them
// by these constants, never by a string, so a misspelt name does not
// compile. The strings are the names FENCER_FAULTS, the fault campaign and
// the tests use. (Faults named only in faults_enabled.go are declared
// there.)

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

// Fault points: where a test of a build with -tags fencer_faults steps in
// (setFaultPoint), by name.
const (
	// pointAcquireReady: an acquire is about to work out its grant (arg:
	// the key).
	pointAcquireReady = "acquire-ready"
	// pointExpirePropose: the leader is about to propose an expiry (arg:
	// the command, which the test may change).
	pointExpirePropose = "expire-propose"
	// pointKeepalivePropose: a keepalive is about to be proposed (arg: the
	// command).
	pointKeepalivePropose = "keepalive-propose"
	// pointRaiseFormat: the leader decided to raise the format level and
	// is about to commit it (arg: the *Node).
	pointRaiseFormat = "raise-format"
	// pointJoinFormat: a join checked the joiner's format level and is
	// about to change the configuration (arg: the joiner's ID).
	pointJoinFormat = "join-format"
	// pointLeaderCh: a leadership notice arrived (arg: leaderNotice); true
	// drops it.
	pointLeaderCh = "leader-ch"
	// pointProposeClusterID: the leader is about to propose the cluster
	// ID; true skips it.
	pointProposeClusterID = "propose-cluster-id"
	// pointProposeExpires: the leader is about to propose the expiries of
	// leases that ran out (arg: the commands); a test may hold it there.
	pointProposeExpires = "propose-expires"
	// pointRestored: the applier restored a snapshot (arg: the table); a
	// test may hold it there.
	pointRestored = "restored"
)
