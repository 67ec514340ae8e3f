//go:build linux

package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// faultKind names one kind of fault.
type faultKind string

const (
	killLeader         faultKind = "kill -9 leader"
	killFollower       faultKind = "kill -9 follower"
	killMinority       faultKind = "kill -9 minority"
	killAll            faultKind = "kill -9 all, restart"
	pauseLeaderShort   faultKind = "SIGSTOP leader, short"
	pauseLeaderLong    faultKind = "SIGSTOP leader, long"
	pauseFollowerShort faultKind = "SIGSTOP follower, short"
	pauseFollowerLong  faultKind = "SIGSTOP follower, long"
	isolateLeader      faultKind = "partition: isolate leader"
	isolateFollower    faultKind = "partition: isolate follower"
	splitMinority      faultKind = "partition: minority/majority"
	ringPartition      faultKind = "partition: majorities ring"
	oneWayPartition    faultKind = "partition: one-way"
	clientPause        faultKind = "client pause > TTL"
	removeReadd        faultKind = "remove, wipe, re-join"
	transferLeader     faultKind = "leader transfer"
	// Membership under faults: the leader removes itself (FENCE.REMOVE of
	// its own ID, or FENCE.TRANSFER first), a follower cut off by a
	// partition is removed, a replaced node joins while another is cut
	// off. Each removed node is replaced as docs/operations.md says: a new
	// data directory and --join under its old ID.
	removeLeader    faultKind = "remove leader (its own ID), replace"
	transferRemove  faultKind = "transfer, remove old leader, replace"
	removeIsolated  faultKind = "partition: remove isolated follower, replace"
	joinDuringSplit faultKind = "partition: replace a follower while another is cut off"
	// Power cuts (data on lazyfs): the node loses what it had not
	// fsynced, a page may be torn, and it restarts on what is left.
	powerCutOne      faultKind = "power cut one node, restart"
	powerCutMajority faultKind = "power cut a majority, restart"
	powerCutAll      faultKind = "power cut every node, restart"
	// revokeLocks is not a fault of the system but an administrative
	// force-release (FENCE.REVOKE) of the early-expiry keys, which the
	// invariants exclude. Only the sensitivity tests deal it.
	revokeLocks faultKind = "FENCE.REVOKE held locks"
)

// deck is the mix of faults: each is dealt once per shuffled round, and
// those that depose the leader twice, so that every run changes leaders
// often. The short pauses last less than the election timeout (1 s) and the
// short TTLs (1.2-1.5 s); the long ones last more than both.
var deck = []faultKind{
	killLeader, killLeader, killFollower, killMinority, killAll,
	pauseLeaderShort, pauseLeaderLong, pauseLeaderLong, pauseFollowerShort, pauseFollowerLong,
	isolateLeader, isolateLeader, isolateFollower, splitMinority, ringPartition, oneWayPartition,
	clientPause, removeReadd, transferLeader, transferLeader,
	removeLeader, transferRemove, removeIsolated, joinDuringSplit,
	powerCutOne, powerCutOne, powerCutMajority, powerCutAll,
}

// powerCuts are the faults that need the nodes' data on lazyfs.
var powerCuts = []faultKind{powerCutOne, powerCutMajority, powerCutAll}

// Timing of the schedule.
const (
	faultEveryMin = 5 * time.Second
	faultEveryMax = 10 * time.Second
	shortPauseMin = 300 * time.Millisecond
	shortPauseMax = 700 * time.Millisecond
	longPauseMin  = 2500 * time.Millisecond
	longPauseMax  = 4 * time.Second
	// recoverWithin bounds the wait for a write to succeed after the
	// leader was lost.
	recoverWithin = 30 * time.Second
)

// fault is one injected and healed fault.
type fault struct {
	kind   faultKind
	at     time.Duration // since the run started
	detail string
	// recovery is how long after the leader was lost (or, for a full
	// restart, after the nodes were started again) a write was first
	// acknowledged; zero if the fault did not depose the leader.
	recovery time.Duration
}

// nemesis injects faults into a cluster on a seeded schedule.
type nemesis struct {
	c      *cluster
	clk    clock
	rng    *rand.Rand
	fenced *fencedWorkload // for client pauses; may be nil
	kinds  []faultKind     // the deck this nemesis deals from
	round  []faultKind
	first  faultKind // dealt first, if set
	// everyMin and everyMax, if set, replace faultEveryMin and
	// faultEveryMax (the soak deals a fault a minute).
	everyMin, everyMax time.Duration

	mu       sync.Mutex
	faults   []fault
	restarts []int64 // clock times of full restarts
	errs     []string
}

func (nm *nemesis) errorf(format string, args ...any) {
	nm.mu.Lock()
	nm.errs = append(nm.errs, fmt.Sprintf("+%v: ", time.Duration(nm.clk.now()).Round(time.Millisecond))+fmt.Sprintf(format, args...))
	nm.mu.Unlock()
}

// draw deals the next fault kind.
func (nm *nemesis) draw() faultKind {
	if nm.first != "" {
		k := nm.first
		nm.first = ""
		return k
	}
	if len(nm.round) == 0 {
		nm.round = append([]faultKind(nil), nm.kinds...)
		nm.rng.Shuffle(len(nm.round), func(i, j int) { nm.round[i], nm.round[j] = nm.round[j], nm.round[i] })
	}
	// Removing and wiping a node is put off until the log is long enough
	// for the node to catch up by snapshot.
	pick := 0
	if nm.appliedIndex() < installAfter {
		for pick < len(nm.round)-1 && replaces(nm.round[pick]) {
			pick++
		}
	}
	k := nm.round[pick]
	nm.round = append(nm.round[:pick], nm.round[pick+1:]...)
	return k
}

// replaces reports whether a fault kind wipes a node and joins it again.
func replaces(k faultKind) bool {
	return k == removeReadd || k == removeLeader || k == transferRemove || k == removeIsolated || k == joinDuringSplit
}

// installAfter is the applied index past which the leader has compacted its
// log (a snapshot every snapshotThreshold entries, 10240 kept after it), so
// that a node joining with an empty data directory is sent a snapshot.
const installAfter = 14000

// appliedIndex returns the largest applied index any node reports.
func (nm *nemesis) appliedIndex() uint64 {
	var top uint64
	for _, i := range nm.c.up() {
		if h, err := nm.c.stateHash(i); err == nil {
			top = max(top, h.index)
		}
	}
	return top
}

// between returns a random duration in [lo, hi].
func (nm *nemesis) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(nm.rng.Int64N(int64(hi-lo)+1))
}

// run injects a fault every 5-10 s (everyMin-everyMax if set) until stop
// is closed; the fault in progress is always healed, and the cluster must
// be whole again (every node a voter, one leader) before the next one.
func (nm *nemesis) run(stop <-chan struct{}) {
	next := time.Now().Add(2 * time.Second)
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Until(next)):
		}
		began := time.Now()
		f := nm.inject(nm.draw())
		nm.mu.Lock()
		nm.faults = append(nm.faults, f)
		nm.mu.Unlock()
		if err := nm.c.awaitMembers(formTimeout); err != nil {
			nm.errorf("after %s: %v", f.kind, err)
		}
		lo, hi := faultEveryMin, faultEveryMax
		if nm.everyMax > 0 {
			lo, hi = nm.everyMin, nm.everyMax
		}
		next = began.Add(nm.between(lo, hi))
		if earliest := time.Now().Add(time.Second); next.Before(earliest) {
			next = earliest
		}
	}
}

// inject applies one fault, holds it, and heals it.
func (nm *nemesis) inject(kind faultKind) fault {
	c := nm.c
	f := fault{kind: kind, at: time.Duration(nm.clk.now())}
	leader, err := c.awaitLeader(formTimeout)
	if err != nil {
		nm.errorf("before %s: %v", kind, err)
		return f
	}
	n := len(c.nodes)
	followers := others(n, leader)
	follower := followers[nm.rng.IntN(len(followers))]
	name := func(i int) string { return c.nodes[i].id }
	switch kind {
	case killLeader:
		f.detail = name(leader)
		lost := time.Now()
		nm.kill(leader)
		f.recovery = nm.probe([]int{leader}, lost)
		time.Sleep(time.Until(lost.Add(nm.between(time.Second, 3*time.Second))))
		nm.start(leader)
	case killFollower:
		f.detail = name(follower)
		nm.kill(follower)
		time.Sleep(nm.between(time.Second, 4*time.Second))
		nm.start(follower)
	case killMinority:
		victims := nm.pick(n, (n-1)/2)
		f.detail = nm.names(victims)
		lost := time.Now()
		for _, i := range victims {
			nm.kill(i)
		}
		if contains(victims, leader) {
			f.recovery = nm.probe(victims, lost)
		}
		time.Sleep(time.Until(lost.Add(nm.between(time.Second, 4*time.Second))))
		for _, i := range victims {
			nm.start(i)
		}
	case killAll:
		f.detail = "every node"
		nm.parallel(c.all(), nm.kill)
		f.recovery = nm.restartAll()
	case pauseLeaderShort, pauseLeaderLong, pauseFollowerShort, pauseFollowerLong:
		victim, d := leader, nm.between(shortPauseMin, shortPauseMax)
		if kind == pauseFollowerShort || kind == pauseFollowerLong {
			victim = follower
		}
		if kind == pauseLeaderLong || kind == pauseFollowerLong {
			d = nm.between(longPauseMin, longPauseMax)
		}
		f.detail = fmt.Sprintf("%s for %v", name(victim), d.Round(time.Millisecond))
		lost := time.Now()
		nm.signal(victim, syscall.SIGSTOP)
		if kind == pauseLeaderLong {
			f.recovery = nm.probe([]int{victim}, lost)
		}
		time.Sleep(time.Until(lost.Add(d)))
		nm.signal(victim, syscall.SIGCONT)
	case isolateLeader:
		f.detail = name(leader)
		lost := time.Now()
		nm.partition(f.detail, cut(n, []int{leader}))
		f.recovery = nm.probe([]int{leader}, lost)
		time.Sleep(time.Until(lost.Add(nm.between(2*time.Second, 5*time.Second))))
		nm.heal()
	case isolateFollower:
		f.detail = name(follower)
		nm.partition(f.detail, cut(n, []int{follower}))
		time.Sleep(nm.between(2*time.Second, 5*time.Second))
		nm.heal()
	case splitMinority:
		minority := nm.pick(n, (n-1)/2)
		f.detail = nm.names(minority) + " | rest"
		nm.partition(f.detail, cut(n, minority))
		time.Sleep(nm.between(2*time.Second, 5*time.Second))
		nm.heal()
	case ringPartition:
		order := nm.rng.Perm(n)
		f.detail = "ring " + nm.names(order)
		if n < 5 {
			// Three nodes make no ring of distinct majorities; the middle
			// one bridges the two ends instead.
			f.detail = "bridge " + nm.names(order)
		}
		nm.partition(f.detail, ring(n, order))
		time.Sleep(nm.between(2*time.Second, 5*time.Second))
		nm.heal()
	case oneWayPartition:
		x := leader
		if nm.rng.IntN(2) == 0 {
			x = follower
		}
		m := newMatrix(n)
		deaf := nm.rng.IntN(2) == 0
		for _, j := range others(n, x) {
			if deaf {
				m[x][j] = true // x hears no one
			} else {
				m[j][x] = true // no one hears x
			}
		}
		f.detail = "no one hears " + name(x)
		if deaf {
			f.detail = name(x) + " hears no one"
		}
		nm.partition(f.detail, m)
		time.Sleep(nm.between(2*time.Second, 5*time.Second))
		nm.heal()
	case clientPause:
		k := 1 + n/2
		f.detail = fmt.Sprintf("%d fenced clients", k)
		if nm.fenced != nil {
			nm.fenced.requestPauses(k)
		}
	case powerCutOne:
		victim := follower
		if nm.rng.IntN(2) == 0 {
			victim = leader
		}
		lost := time.Now()
		f.detail = nm.powerCut([]int{victim})
		if victim == leader {
			f.recovery = nm.probe([]int{victim}, lost)
		}
		time.Sleep(time.Until(lost.Add(nm.between(time.Second, 3*time.Second))))
		nm.start(victim)
	case powerCutMajority:
		victims := nm.pick(n, n/2+1)
		f.detail = nm.powerCut(victims)
		time.Sleep(nm.between(500*time.Millisecond, 2*time.Second))
		restarted := time.Now()
		nm.parallel(victims, nm.start)
		if contains(victims, leader) {
			f.recovery = nm.probe(nil, restarted)
		}
	case powerCutAll:
		f.detail = nm.powerCut(c.all())
		f.recovery = nm.restartAll()
	case removeReadd:
		f.detail = fmt.Sprintf("%s at index %d", name(follower), nm.appliedIndex())
		nm.kill(follower)
		nm.remove(follower, -1)
		time.Sleep(nm.between(time.Second, 3*time.Second))
		nm.replace(follower)
	case removeLeader, transferRemove:
		via := leader // sent to the leader, naming itself
		f.detail = name(leader)
		if kind == transferRemove {
			// Moved away first: the removal is then an ordinary one.
			via = -1
			if v, err := c.call(nm.up()[0], adminTimeout, "FENCE.TRANSFER"); err != nil || v != "OK" {
				f.detail += fmt.Sprintf(" (FENCE.TRANSFER answered %v %v)", v, err)
			}
		}
		lost := time.Now()
		nm.remove(leader, via)
		f.recovery = nm.probe([]int{leader}, lost)
		nm.awaitNotMember(leader)
		nm.kill(leader)
		nm.replace(leader)
	case removeIsolated:
		f.detail = name(follower)
		nm.partition(f.detail, cut(n, []int{follower}))
		nm.remove(follower, -1)
		time.Sleep(nm.between(time.Second, 3*time.Second))
		nm.heal()
		// It may never hear of its removal: the leader's last word to it
		// was dropped. Stopped and replaced, as the docs say.
		nm.kill(follower)
		nm.replace(follower)
	case joinDuringSplit:
		other := followers[0]
		if other == follower && len(followers) > 1 {
			other = followers[1]
		}
		f.detail = fmt.Sprintf("%s replaced, %s cut off", name(follower), name(other))
		nm.kill(follower)
		nm.remove(follower, -1)
		if other != follower {
			nm.partition(name(other), cut(n, []int{other}))
		}
		// With three nodes the two left have no majority while one is cut
		// off: the replacement waits (it asks the leader whether its ID is
		// still a member before it starts) until the partition heals.
		started := make(chan struct{})
		go func() {
			defer close(started)
			nm.replace(follower)
		}()
		time.Sleep(nm.between(time.Second, 3*time.Second))
		nm.heal()
		<-started
	case revokeLocks:
		revoked := 0
		for k := range expiryKeys {
			v, err := c.call(nm.up()[0], adminTimeout, "FENCE.REVOKE", fmt.Sprintf("exp-%d", k))
			if n, isInt := v.(int64); err == nil && isInt && n == 1 {
				revoked++
			}
		}
		f.detail = fmt.Sprintf("%d held", revoked)
	case transferLeader:
		f.detail = "from " + name(leader)
		v, err := c.call(nm.up()[0], adminTimeout, "FENCE.TRANSFER")
		if err != nil || v != "OK" {
			f.detail += fmt.Sprintf(" (answered %v %v)", v, err)
		}
	}
	return f
}

// restartAll starts every node after a while, all down, records the full
// restart for the token checker, and returns how long after the start the
// first write was acknowledged.
func (nm *nemesis) restartAll() time.Duration {
	time.Sleep(nm.between(500*time.Millisecond, 2*time.Second))
	restarted := time.Now()
	nm.mu.Lock()
	nm.restarts = append(nm.restarts, nm.clk.now())
	nm.mu.Unlock()
	nm.parallel(nm.c.all(), nm.start)
	return nm.probe(nil, restarted)
}

// runFor deals faults for d, then lets the fault in progress heal.
func (nm *nemesis) runFor(d time.Duration) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		nm.run(stop)
	}()
	time.Sleep(d)
	close(stop)
	<-done
}

// powerCut cuts the power of the nodes at once: all are killed first,
// then each one's file system drops what was not fsynced. It says what
// each lost.
func (nm *nemesis) powerCut(victims []int) string {
	nm.parallel(victims, nm.kill)
	lost := make([]string, len(victims))
	nm.parallel(victims, func(i int) {
		r, err := nm.c.nodes[i].powerCut()
		if err != nil {
			nm.errorf("power cut of %s: %v", nm.c.nodes[i].id, err)
		}
		lost[slices.Index(victims, i)] = nm.c.nodes[i].id + " (" + r.String() + ")"
	})
	return strings.Join(lost, ", ")
}

func (nm *nemesis) kill(i int) {
	if err := nm.c.nodes[i].kill(); err != nil {
		nm.errorf("%v", err)
	}
}

func (nm *nemesis) start(i int) {
	if err := nm.c.nodes[i].start(); err != nil {
		nm.errorf("%v", err)
	}
}

func (nm *nemesis) signal(i int, sig syscall.Signal) {
	if err := nm.c.nodes[i].signal(sig); err != nil {
		nm.errorf("%v", err)
	}
}

func (nm *nemesis) partition(what string, m [][]bool) {
	if err := nm.c.nw.setBlocked(m); err != nil {
		nm.errorf("partition %s: %v", what, err)
	}
}

func (nm *nemesis) heal() {
	if err := nm.c.nw.heal(); err != nil {
		nm.errorf("heal: %v", err)
	}
}

// parallel runs f for every index at once.
func (nm *nemesis) parallel(idx []int, f func(int)) {
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}

// up returns the nodes that run and are not paused (at least one: the
// nemesis never takes all down without bringing them back).
func (nm *nemesis) up() []int {
	if u := nm.c.up(); len(u) > 0 {
		return u
	}
	return []int{0}
}

// pick returns k distinct random node indexes.
func (nm *nemesis) pick(n, k int) []int { return nm.rng.Perm(n)[:k] }

func (nm *nemesis) names(idx []int) string {
	var s []string
	for _, i := range idx {
		s = append(s, nm.c.nodes[i].id)
	}
	return strings.Join(s, ",")
}

// probe measures recovery: it acquires a probe lock through the nodes not
// in exclude until one acknowledges it, and returns the time since lost.
func (nm *nemesis) probe(exclude []int, lost time.Time) time.Duration {
	deadline := lost.Add(recoverWithin)
	for time.Now().Before(deadline) {
		for i := range nm.c.nodes {
			if contains(exclude, i) || !nm.c.nodes[i].running() {
				continue
			}
			v, err := nm.c.call(i, 2*time.Second, "FENCE.ACQUIRE", "chaos-probe", "prober", ms(time.Hour))
			if _, granted, gerr := asGrant(v); err == nil && gerr == nil && granted {
				return time.Since(lost)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	nm.errorf("no write acknowledged within %v of losing the leader", recoverWithin)
	return recoverWithin
}

// replace starts node i, removed before, with an empty data directory and
// --join through the others, under its old ID.
func (nm *nemesis) replace(i int) {
	if err := nm.c.nodes[i].wipe(); err != nil {
		nm.errorf("wiping %s: %v", nm.c.nodes[i].id, err)
	}
	var join []string
	for _, j := range others(len(nm.c.nodes), i) {
		join = append(join, nm.c.nodes[j].addr())
	}
	nm.c.nodes[i].setJoin(join)
	nm.start(i)
}

// awaitNotMember waits until removed node i says it is not a member, as
// docs/operations.md says a removed node that heard of its removal does.
func (nm *nemesis) awaitNotMember(i int) {
	deadline := time.Now().Add(recoverWithin)
	var v any
	var err error
	for time.Now().Before(deadline) {
		v, err = nm.c.call(i, 2*time.Second, "FENCE.ACQUIRE", "chaos-removed", "nemesis", ms(time.Minute))
		if e, isErr := v.(respError); isErr && e.Code() == "NOLEADER" && strings.Contains(string(e), "not a member") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	nm.errorf("removed %s still answers %v %v after %v", nm.c.nodes[i].id, v, err, recoverWithin)
}

// remove takes node i out of the cluster with FENCE.REMOVE, through node
// via, or any other node that is up if via is -1, retrying answers that
// leave the outcome open.
func (nm *nemesis) remove(i, via int) {
	id := nm.c.nodes[i].id
	deadline := time.Now().Add(recoverWithin)
	uncertain := false
	for time.Now().Before(deadline) {
		via := via
		if via < 0 || uncertain {
			via = others(len(nm.c.nodes), i)[nm.rng.IntN(len(nm.c.nodes)-1)]
		}
		v, err := nm.c.call(via, adminTimeout+serverRequestTimeout, "FENCE.REMOVE", id)
		if err == nil && v == "OK" {
			return
		}
		if e, isErr := v.(respError); isErr {
			if uncertain && strings.Contains(string(e), "no such member") {
				return
			}
			if e.Code() == "ERR" {
				nm.errorf("FENCE.REMOVE %s: %s", id, e)
				return
			}
		}
		uncertain = true
		time.Sleep(200 * time.Millisecond)
	}
	nm.errorf("FENCE.REMOVE %s did not succeed within %v", id, recoverWithin)
}

// others returns 0..n-1 without skip.
func others(n, skip int) []int {
	var out []int
	for i := range n {
		if i != skip {
			out = append(out, i)
		}
	}
	return out
}

func contains(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// cut blocks both directions between the nodes in side and the others.
func cut(n int, side []int) [][]bool {
	m := newMatrix(n)
	for i := range n {
		for j := range n {
			if contains(side, i) != contains(side, j) {
				m[i][j] = true
			}
		}
	}
	return m
}

// ring lets each node talk only to its neighbours in order: with five
// nodes every node sees a majority (itself and two neighbours) and no two
// see the same one. With three, the ends of the order are cut from each
// other and the middle node bridges them.
func ring(n int, order []int) [][]bool {
	m := newMatrix(n)
	pos := make([]int, n)
	for p, i := range order {
		pos[i] = p
	}
	for i := range n {
		for j := range n {
			d := (pos[i] - pos[j] + n) % n
			near := d <= 1 || d == n-1
			if n < 5 {
				near = !(pos[i] == 0 && pos[j] == n-1 || pos[j] == 0 && pos[i] == n-1)
			}
			m[i][j] = !near
		}
	}
	return m
}
