// Package chaos is fencer's fault campaign: it runs clusters of the built
// fencerd as real processes, with fsync on, injects faults while concurrent
// clients record histories, and checks those histories against the
// invariants of docs/design.md.
//
// Every node runs in its own network namespace, attached by a veth pair to a
// bridge in a hub namespace that the campaign also creates; the test's
// clients dial from the hub. Addresses come from 10.77.0.0/24 and exist only
// inside those namespaces, so no packet leaves them. Partitions are iptables
// rules in a node's namespace that drop what one peer sends it, which cuts
// each direction of each link on its own (one-way partitions, rings).
//
// Faults, drawn from a seeded schedule about every 5-10 s and each healed:
// kill -9 of the leader, of a follower, of a minority and of every node
// (then restarted with the same flags); SIGSTOP/SIGCONT of the leader and of
// a follower, shorter and longer than the election timeout and the short
// TTL; partitions (isolate the leader, minority/majority split, majorities
// ring or bridge, one-way); client pauses longer than the TTL; removing a
// node, wiping it and joining it again; leadership transfer; power cuts of
// one node, a majority and every node; the leader removing itself (with and
// without a transfer first), a follower removed while cut off, a node
// replaced while another is cut off.
//
// Each node's data directory is a lazyfs mount (internal/lazyfs): a power
// cut kills the process and throws away what it had not fsynced (file
// bytes since their last fsync, names since their directory's last fsync,
// one torn page). CHAOS_LAZYFS=0 uses the real disk and deals no power
// cuts. TestChaosPowerCuts and TestChaosMembership deal only those faults.
//
// Workloads: native acquires checked for linearizability (long TTLs) and for
// early expiry (short TTLs); a fenced read-modify-write through native
// acquires, through SET NX with the Lua extend and release scripts of Redis's
// distributed-lock page (run by fencer's Lua engine), and through
// go-redsync/redsync; locks held under sessions (FENCE.SESSION, 1.5 s TTL),
// which are closed, revoked or abandoned (session_test.go); and an
// election through the Go client's Election, whose leaders write under
// their epoch and resign, close or abandon their sessions
// (election_test.go); read-write locks whose readers and writers fence a
// store with the read-write rule, and a semaphore whose permit holders
// fence per slot (shared_test.go).
//
// Checkers: linearizability of acquire, release and status with porcupine
// (long TTLs); no early expiry (short TTLs, and locks under sessions until
// the session's validity); fenced read-modify-write on an in-process store
// guarded by fence.Memory (no acknowledged write lost); tokens unique and
// increasing in real-time order across the run, restarts included; no
// grant under a session its client had seen end; at most one leader per
// epoch, epochs that never go back (in real-time order of the Campaigns
// and in the order the store accepted writes), a deposed leader's write
// refused, Leader() never behind a Campaign that returned before it; at
// the end, the same FENCE.STATEHASH on every node and no panic or data
// race in any log. TestChaosSessions and TestChaosElection run one of the
// two workloads alone.
//
// TestClockRate runs 3-node clusters whose leader's lease clock runs fast
// or slow by a factor (fencerd built with -tags fencer_faults,
// FENCER_CLOCK_RATE) and tabulates early expiries with and without the
// client's drift allowance and late writes refused by the fenced store
// (`make chaos-clock` for more factors and longer runs).
//
// TestSoak (`make soak`, an hour; a 75 s version in go test) runs a cluster
// under mixed load and a fault a minute, samples each node's memory,
// goroutines, fds, log and snapshots into a CSV and a gnuplot PNG, and fails
// on growth as well as on violations (docs/operations.md, Soak).
//
// TestRollingUpgrade (upgrade_test.go) starts a 3-node cluster of the build
// testdata/upgrade-rolling-from names and upgrades it node by node to this
// one under the lock, session, read-write and Redis-script workloads: the
// followers of an old leader first (one catching up through the old
// leader's snapshot), then the old leader steps down onto a new node, its
// old follower catches up through the new leader's snapshot, and the last
// old node is upgraded. It polls every new node's INFO: the new format
// (fencer_format_in_use:1) must not be used while an old node is a member,
// and must be once none is. It also restores the baseline's `fencer
// snapshot save` file into this build, and starts the baseline on a data
// directory written at the new format, which must refuse it. The checkers
// are the campaign's; `make upgrade-full` runs longer workloads.
//
// The tests need root (namespaces and iptables), ip(8) and iptables(8).
// `go test ./integration/chaos/` runs a short campaign on 3 and 5 nodes and
// the sensitivity tests; `make chaos` runs the full one, configured by
// CHAOS_DURATION (per cluster size, e.g. 3m), CHAOS_SEED, CHAOS_NODES (e.g.
// "3 5"), CHAOS_CLIENTS (clients per node, default 6), CHAOS_RACE=1 (fencerd
// built with -race), CHAOS_KEEP=1 (keep logs and data of a passing run) and
// CHAOS_MIN_LEADER_CHANGES (default 10 for runs of 2 minutes or more, else
// 1). docs/safety.md has the argument the campaign tests and its figures.
package chaos
