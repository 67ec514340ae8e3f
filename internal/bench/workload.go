package bench

import (
	"fmt"
	"strings"
)

// The workloads of a lock run, by name.
const (
	// Uncontended: each client acquires and releases its own names in turn.
	Uncontended = "uncontended"
	// Contended: all clients compete for the same names, queueing on the
	// server (FENCE.ACQUIRE ... WAIT) while another client holds one.
	Contended = "contended"
	// ReadShared: all clients take read locks of the same names
	// (FENCE.RLOCK), which they hold together, and release them in turn.
	ReadShared = "rw-read"
	// Semaphore: all clients take permits of the same semaphores
	// (FENCE.SEMACQUIRE), with a permit for every client unless Permits
	// says fewer, and release them in turn.
	Semaphore = "semaphore"
)

// Workload describes one lock workload. Workloads is the one list of them
// that Run, make bench (internal/cmd/benchrun), the peers' runner and
// fencer bench read: a workload added here is run, offered and documented
// by all of them.
type Workload struct {
	Name string
	// Help says what the clients do, for fencer bench --help.
	Help string
	// Keys is the default of Config.Keys.
	Keys int
	// Peers reports whether the peers (Redis, Redlock, etcd) have the
	// workload too: only the plain lock's.
	Peers bool
}

// Workloads are the lock workloads, in the order tables list them.
var Workloads = []Workload{
	{Name: Uncontended, Keys: 8, Peers: true,
		Help: "each client acquires and releases its own --keys names in turn (default 8 names per client)"},
	{Name: Contended, Keys: 1, Peers: true,
		Help: "all clients compete for --keys names (default 1), queueing on the server (FENCE.ACQUIRE ... WAIT) while another holds one; handoffs_per_s counts grants whose previous holder was another client"},
	{Name: ReadShared, Keys: 8,
		Help: "all clients take read locks (FENCE.RLOCK) of the same --keys names (default 8), held together, and release them in turn"},
	{Name: Semaphore, Keys: 1,
		Help: "all clients take permits (FENCE.SEMACQUIRE) of --keys semaphores (default 1), a permit for every client unless --permits says fewer"},
}

// LookupWorkload returns the workload named name.
func LookupWorkload(name string) (Workload, bool) {
	for _, w := range Workloads {
		if w.Name == name {
			return w, true
		}
	}
	return Workload{}, false
}

// WorkloadNames are the names of the workloads, the peers' only if peers.
func WorkloadNames(peers bool) []string {
	var out []string
	for _, w := range Workloads {
		if !peers || w.Peers {
			out = append(out, w.Name)
		}
	}
	return out
}

// UnknownWorkload is the error of a workload name not in Workloads.
func UnknownWorkload(name string) error {
	return fmt.Errorf("unknown workload %q (want one of %s)", name, strings.Join(WorkloadNames(false), ", "))
}
