// Package bench is the measuring harness of `fencer bench` and `make bench`
// (docs/performance.md).
//
// Run drives a fencer cluster with one of Workloads (workload.go: the plain
// lock's uncontended and contended, which the peers run too, and two of
// shared keys, rw-read and semaphore), over plain RESP, one connection per
// client
// goroutine, a fresh owner per acquire, and returns a Result whose JSON
// fields are exactly peerbench's, with the same safety checks (overlaps,
// token regressions). StartFencer and StartRaft start real processes on
// loopback: fencerd clusters, and the bare-raft baseline
// (internal/cmd/raftbench) that runs on fencerd's raft settings
// (server.RaftConfig and its neighbours). Procs owns every child process, each in its
// own process group, and stops them all. Table renders result lines of any
// source (fencer, the peers, the baseline) as one Markdown table with the
// ratios docs/performance.md sets goals for.
//
// The figures are only as good as the machine is quiet: every result line
// carries the harness's own CPU and the whole machine's, so that a reader
// can tell a latency-bound figure from a CPU-bound one.
package bench
