package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// clRunAll runs every args list of fencer at once against d, with env, and
// returns their exit codes and stderr.
func clRunAll(t *testing.T, bin string, d *daemon, env []string, runs ...[]string) (codes []int, stderrs []string) {
	t.Helper()
	codes, stderrs = make([]int, len(runs)), make([]string, len(runs))
	var wg sync.WaitGroup
	for i, args := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, stderrs[i], codes[i] = clFencer(t, bin, d, env, args...)
		}()
	}
	wg.Wait()
	return codes, stderrs
}

// clEvents reads a log of "start|end <token> [<slot>]" lines, checks that
// every command started and ended once, and returns the most commands
// that ran at once, and whether two of them that ran at once had the same
// slot.
func clEvents(t *testing.T, path string, commands int) (most int, sameSlot bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]string{} // token: slot
	started := map[string]bool{}
	for _, line := range clLines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("log line %q", line)
		}
		tok, slot := f[1], ""
		if len(f) > 2 {
			slot = f[2]
		}
		switch f[0] {
		case "start":
			if started[tok] {
				t.Fatalf("token %s started twice:\n%s", tok, b)
			}
			started[tok] = true
			for _, s := range running {
				if slot != "" && s == slot {
					sameSlot = true
				}
			}
			running[tok] = slot
			most = max(most, len(running))
		case "end":
			delete(running, tok)
		}
	}
	if len(started) != commands || len(running) != 0 {
		t.Fatalf("%d commands started, %d did not end, want %d:\n%s", len(started), len(running), commands, b)
	}
	return most, sameSlot
}

// A script that logs its start and end (with its token, and its slot if
// any) around a pause, for clEvents.
const clHoldScript = `echo "start $FENCER_TOKEN $FENCER_SLOT" >> "$EVENTS"; sleep 1; echo "end $FENCER_TOKEN" >> "$EVENTS"`

// fencer lock --shared runs two commands at once (each waits to see the
// other start); --write runs them one at a time, and not while a --shared
// command runs.
func TestClientCLISharedAndWriteLocks(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	dir := t.TempDir()

	// Each reader marks its arrival, then waits for the other's: both
	// finish only if they held the read lock together.
	meet := `touch "$MEET/$FENCER_TOKEN"; for i in $(seq 100); do [ $(ls "$MEET" | wc -l) -ge 2 ] && exit 0; sleep 0.1; done; exit 1`
	meetDir := filepath.Join(dir, "meet")
	if err := os.Mkdir(meetDir, 0o755); err != nil {
		t.Fatal(err)
	}
	shared := []string{"lock", "--shared", "--ttl", "5s", "catalog", "--", "sh", "-c", meet}
	codes, errs := clRunAll(t, bin, d, []string{"MEET=" + meetDir}, shared, shared)
	if codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("two fencer lock --shared did not run at once: exit codes %v, stderr %q", codes, errs)
	}
	if ents, _ := os.ReadDir(meetDir); len(ents) != 2 {
		t.Fatalf("the readers' tokens: %v; want two different ones", ents)
	}

	// Writers, and a reader among them, take turns.
	events := filepath.Join(dir, "events")
	write := []string{"lock", "--write", "--ttl", "5s", "catalog", "--", "sh", "-c", clHoldScript}
	read := []string{"lock", "--shared", "--ttl", "5s", "catalog", "--", "sh", "-c", clHoldScript}
	codes, errs = clRunAll(t, bin, d, []string{"EVENTS=" + events}, write, write, read)
	if fmt.Sprint(codes) != "[0 0 0]" {
		t.Fatalf("fencer lock --write, --write, --shared: exit codes %v, stderr %q", codes, errs)
	}
	if most, _ := clEvents(t, events, 3); most != 1 {
		b, _ := os.ReadFile(events)
		t.Fatalf("%d commands ran at once under writers:\n%s", most, b)
	}

	// The read-write lock is not the plain lock of the same name.
	if out, errOut, code := clFencer(t, bin, d, nil, "lock", "catalog", "--", "true"); code != 0 {
		t.Fatalf("a plain lock named like a free read-write lock: exit %d, %q %q", code, out, errOut)
	}
}

// fencer lock --permits 2: three commands, at most two at once, each with
// its slot in $FENCER_SLOT, two holders never sharing a slot.
func TestClientCLIPermits(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	events := filepath.Join(t.TempDir(), "events")
	permit := []string{"lock", "--permits", "2", "--ttl", "5s", "gpu", "--", "sh", "-c", clHoldScript}
	codes, errs := clRunAll(t, bin, d, []string{"EVENTS=" + events}, permit, permit, permit)
	if fmt.Sprint(codes) != "[0 0 0]" {
		t.Fatalf("three fencer lock --permits 2: exit codes %v, stderr %q", codes, errs)
	}
	most, sameSlot := clEvents(t, events, 3)
	b, _ := os.ReadFile(events)
	if most != 2 || sameSlot {
		t.Fatalf("%d commands ran at once (want 2), same slot at once %v:\n%s", most, sameSlot, b)
	}
	for _, line := range clLines(string(b)) {
		if f := strings.Fields(line); f[0] == "start" {
			if len(f) != 3 {
				t.Fatalf("no $FENCER_SLOT in %q", line)
			}
			if s, err := strconv.Atoi(f[2]); err != nil || s < 0 || s > 1 {
				t.Fatalf("$FENCER_SLOT %q is not 0 or 1", f[2])
			}
		}
	}
	// A different number of permits for the held semaphore is refused.
	hold := filepath.Join(t.TempDir(), "held")
	done := make(chan int, 1)
	go func() {
		_, _, code := clFencer(t, bin, d, nil, "lock", "--permits", "2", "gpu", "--", "sh", "-c",
			`touch "`+hold+`"; sleep 3`)
		done <- code
	}()
	clAwaitFile(t, hold, 20*time.Second)
	_, errOut, code := clFencer(t, bin, d, nil, "lock", "--permits", "3", "gpu", "--", "true")
	if code != 125 || !strings.Contains(errOut, "2 permits") {
		t.Fatalf("--permits 3 on a semaphore of 2: exit %d, stderr %q; want 125 naming its 2 permits", code, errOut)
	}
	if c := <-done; c != 0 {
		t.Fatalf("the holder exited %d", c)
	}
}

// The three flags exclude each other; --permits needs 1 to 1024.
func TestClientCLILockFlagsExclude(t *testing.T) {
	d := startFencerd(t)
	bin := clFencerBin(t)
	for _, args := range [][]string{
		{"--shared", "--write"},
		{"--shared", "--permits", "2"},
		{"--write", "--permits", "2"},
	} {
		argv := append(append([]string{"lock"}, args...), "x", "--", "true")
		_, errOut, code := clFencer(t, bin, d, nil, argv...)
		if code != 2 || !strings.Contains(errOut, "exclude each other") {
			t.Errorf("fencer %s: exit %d, stderr %q; want 2 and 'exclude each other'", strings.Join(argv, " "), code, errOut)
		}
	}
	for _, n := range []string{"0", "-1", "1025"} {
		_, errOut, code := clFencer(t, bin, d, nil, "lock", "--permits", n, "x", "--", "true")
		if code != 2 || !strings.Contains(errOut, "1 to 1024 permits") {
			t.Errorf("fencer lock --permits %s: exit %d, stderr %q", n, code, errOut)
		}
	}
}

// A semaphore of 3 under 20 processes (issue 20, "Must show"): twenty
// fencer lock --permits 3 processes (the Go client) against a three-node
// cluster of fencerd processes, whose leader is killed with SIGKILL once
// some of them have run. Every command runs, never more than 3 at once, no
// two at once in the same slot, and some run after the kill.
func TestClientCLISemaphoreOfThreeUnderTwentyProcesses(t *testing.T) {
	const processes, permits = 20, 3
	cl := startNodeCluster(t, 3)
	bin := clFencerBin(t)
	events := filepath.Join(t.TempDir(), "events")
	var addrs []string
	for _, d := range cl.nodes {
		addrs = append(addrs, d.addr)
	}
	// FENCER_ADDR names every node (the last value of a key wins).
	env := []string{"EVENTS=" + events, "FENCER_ADDR=" + strings.Join(addrs, ",")}
	hold := `echo "start $FENCER_TOKEN $FENCER_SLOT" >> "$EVENTS"; sleep 0.4; echo "end $FENCER_TOKEN" >> "$EVENTS"`
	permit := []string{"lock", "--permits", strconv.Itoa(permits), "--ttl", "5s", "sem", "--", "sh", "-c", hold}
	runs := make([][]string, processes)
	for i := range runs {
		runs[i] = permit
	}
	type ran struct {
		codes   []int
		stderrs []string
	}
	done := make(chan ran, 1)
	go func() {
		codes, stderrs := clRunAll(t, bin, cl.nodes[0], env, runs...)
		done <- ran{codes, stderrs}
	}()
	starts := func() int {
		b, _ := os.ReadFile(events)
		return strings.Count(string(b), "start ")
	}
	deadline := time.Now().Add(30 * time.Second)
	for starts() < 2*permits {
		if time.Now().After(deadline) {
			t.Fatalf("only %d commands started in 30s", starts())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cl.killLeader(t)
	before := starts()
	r := <-done
	for i, c := range r.codes {
		if c != 0 {
			t.Fatalf("process %d of fencer lock --permits %d exited %d: %s", i, permits, c, r.stderrs[i])
		}
	}
	most, sameSlot := clEvents(t, events, processes)
	b, _ := os.ReadFile(events)
	if most > permits || sameSlot {
		t.Fatalf("%d commands ran at once (at most %d allowed), same slot at once %v:\n%s", most, permits, sameSlot, b)
	}
	if most < 2 {
		t.Fatalf("at most %d command ran at once: the processes did not share the semaphore:\n%s", most, b)
	}
	if after := processes - before; after < permits {
		t.Fatalf("only %d commands started after the leader was killed", after)
	}
	t.Logf("%d commands, at most %d at once, %d started after the kill", processes, most, processes-before)
}
