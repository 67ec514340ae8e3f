//go:build linux

package chaos

import (
	"fmt"
	"hash/fnv"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Workload 1: acquire, release and status on a few keys, checked for
// linearizability. TTLs are long, so no lease expires during a run and the
// model needs no clock. Keys change every linKeyPeriod, which keeps each
// key's history short for the checker and leaves behind any lock whose
// acquire had an unknown outcome and took effect after its owner's release.
const (
	linTTL       = time.Hour
	linKeyPeriod = 5 * time.Second
	linKeys      = 2
	// linCheckTimeout bounds porcupine; past it the result is Unknown.
	linCheckTimeout = 3 * time.Minute
)

type linKind uint8

const (
	linAcquire linKind = iota
	linRelease
	linStatus
)

// linInput is an operation's call.
type linInput struct {
	kind       linKind
	key, owner string
}

// linOutput is an operation's result. unknown means the client could not
// tell whether it took effect.
type linOutput struct {
	unknown bool
	ok      bool   // acquire: granted; release: 1; status: held
	owner   string // status: the holder
	token   uint64 // acquire, status
}

// linState is one key's state in the model. token 0 means held through an
// acquire whose outcome was unknown, so its token is not known yet.
type linState struct {
	holder   string
	token    uint64
	maxToken uint64 // the largest token this key has granted
	// releasers lists, sorted and each between two \x00, the owners whose
	// release of the key the server may remember: it remembers each
	// owner's, not only the last one's.
	releasers string
}

// remembers reports whether owner's release of the key may be remembered.
func (s linState) remembers(owner string) bool {
	return strings.Contains(s.releasers, "\x00"+owner+"\x00")
}

// released returns s with owner's release remembered.
func (s linState) released(owner string) linState {
	if s.remembers(owner) {
		return s
	}
	owners := append(strings.Split(strings.Trim(s.releasers, "\x00"), "\x00"), owner)
	if s.releasers == "" {
		owners = owners[1:]
	}
	sort.Strings(owners)
	s.releasers = "\x00" + strings.Join(owners, "\x00\x00") + "\x00"
	return s
}

// linStep is the sequential specification of one lock (docs/design.md,
// invariants 1, 2, 4 and 5, with TTLs too long to expire).
func linStep(s linState, in linInput, out linOutput) (bool, linState) {
	switch in.kind {
	case linAcquire:
		switch {
		case out.unknown:
			// Took effect here (granted if free), or, linearized after
			// everything else, never.
			if s.holder == "" {
				s.holder, s.token = in.owner, 0
			}
			return true, s
		case !out.ok:
			return s.holder != "" && s.holder != in.owner, s
		case s.holder == "":
			if out.token <= s.maxToken {
				return false, s
			}
			s.holder, s.token, s.maxToken = in.owner, out.token, out.token
			return true, s
		case s.holder == in.owner && (s.token == 0 || s.token == out.token):
			// A renewal of a grant whose outcome was unknown.
			if s.token == 0 && out.token <= s.maxToken {
				return false, s
			}
			s.token, s.maxToken = out.token, max(s.maxToken, out.token)
			return true, s
		}
		return false, s
	case linRelease:
		switch {
		case out.unknown:
			if s.holder == in.owner {
				s.holder, s.token = "", 0
				s = s.released(in.owner)
			}
			return true, s
		case out.ok && s.holder == in.owner:
			s.holder, s.token = "", 0
			return true, s.released(in.owner)
		case out.ok:
			// A repeated release the server still remembers.
			return s.remembers(in.owner), s
		}
		// 0: not the holder. The server may also have forgotten an earlier
		// release by this owner, so releasers does not matter.
		return s.holder != in.owner, s
	case linStatus:
		switch {
		case !out.ok:
			return s.holder == "", s
		case s.holder != out.owner:
			return false, s
		case s.token == 0:
			if out.token <= s.maxToken {
				return false, s
			}
			s.token, s.maxToken = out.token, out.token
			return true, s
		}
		return s.token == out.token, s
	}
	return false, s
}

// linModel is the porcupine model: linStep per key.
var linModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := make(map[string][]porcupine.Operation)
		var keys []string
		for _, op := range history {
			k := op.Input.(linInput).key
			if _, seen := byKey[k]; !seen {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return linState{} },
	Step: func(state, input, output any) (bool, any) {
		return linStep(state.(linState), input.(linInput), output.(linOutput))
	},
	Hash: func(state any) uint64 {
		s := state.(linState)
		h := fnv.New64a()
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%s", s.holder, s.token, s.maxToken, s.releasers)
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in, okIn := input.(linInput)
		out, okOut := output.(linOutput)
		if !okIn || !okOut {
			// porcupine v1.3.1's visualizer can meet a return before
			// its call when their times tie.
			return fmt.Sprintf("%v -> %v", input, output)
		}
		res := "?"
		switch {
		case out.unknown:
		case in.kind == linAcquire && out.ok:
			res = "token " + strconv.FormatUint(out.token, 10)
		case in.kind == linStatus && out.ok:
			res = fmt.Sprintf("%s/%d", out.owner, out.token)
		case in.kind == linStatus:
			res = "free"
		default:
			res = strconv.FormatBool(out.ok)
		}
		return fmt.Sprintf("%s(%s) -> %s", [...]string{"acquire", "release", "status"}[in.kind], in.owner, res)
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		if s.holder == "" {
			return "free"
		}
		return fmt.Sprintf("%s/%d", s.holder, s.token)
	},
}

// linWorkload records the history of workload 1.
type linWorkload struct {
	grants *grantLog
	mu     sync.Mutex
	ops    []porcupine.Operation
}

func (w *linWorkload) record(cl *client, in linInput, out linOutput, call, ret int64) {
	if out.unknown {
		ret = math.MaxInt64 // it may take effect at any later time
	}
	w.mu.Lock()
	w.ops = append(w.ops, porcupine.Operation{ClientId: cl.id, Input: in, Call: call, Output: out, Return: ret})
	w.mu.Unlock()
}

// run is one client's loop until stop is closed.
func (w *linWorkload) run(cl *client, stop <-chan struct{}) {
	for !stopped(stop) {
		key := fmt.Sprintf("lin-%d-%d", cl.clk.now()/int64(linKeyPeriod), cl.rng.IntN(linKeys))
		if cl.rng.IntN(4) == 0 {
			w.status(cl, key)
			cl.think()
			continue
		}
		owner := cl.owner()
		v, out, call, ret := cl.do(clientTimeout, "FENCE.ACQUIRE", key, owner, ms(linTTL))
		switch out {
		case unknown:
			w.record(cl, linInput{linAcquire, key, owner}, linOutput{unknown: true}, call, ret)
			w.release(cl, key, owner, nil)
		case ok:
			tok, granted, err := asGrant(v)
			if err != nil {
				cl.count.odd("FENCE.ACQUIRE", v)
				continue
			}
			w.record(cl, linInput{linAcquire, key, owner}, linOutput{ok: granted, token: tok}, call, ret)
			if !granted {
				break
			}
			g := grant{workload: "linearizable", key: key, owner: owner, token: tok, ttl: linTTL,
				call: call, ret: ret, validUntil: call + int64(linTTL)}
			if cl.rng.IntN(3) == 0 {
				w.status(cl, key)
			}
			time.Sleep(time.Duration(cl.rng.IntN(20)) * time.Millisecond)
			w.release(cl, key, owner, &g)
			w.grants.add(g)
		}
		cl.think()
	}
}

// status reads a key and records the read unless it failed: a read with an
// unknown outcome changed nothing, so it is left out.
func (w *linWorkload) status(cl *client, key string) {
	if r, read := cl.status(key); read {
		w.record(cl, linInput{linStatus, key, ""}, linOutput{ok: r.held, owner: r.owner, token: r.token}, r.call, r.ret)
	}
}

// release sends RELEASE until its outcome is known, or for at most 30 s,
// recording every attempt that may have taken effect.
func (w *linWorkload) release(cl *client, key, owner string, g *grant) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		v, out, call, ret := cl.do(clientTimeout, "FENCE.RELEASE", key, owner)
		if g != nil && g.released == 0 && out != failed {
			g.released = call
		}
		switch out {
		case ok:
			n, isInt := v.(int64)
			if !isInt || n < 0 || n > 1 {
				cl.count.odd("FENCE.RELEASE", v)
				return
			}
			w.record(cl, linInput{linRelease, key, owner}, linOutput{ok: n == 1}, call, ret)
			return
		case unknown:
			w.record(cl, linInput{linRelease, key, owner}, linOutput{unknown: true}, call, ret)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// check runs porcupine over the history. On a violation it writes the
// visualization to dir and names the file in the result.
func (w *linWorkload) check(dir string) checkResult {
	w.mu.Lock()
	ops := append([]porcupine.Operation(nil), w.ops...)
	w.mu.Unlock()
	// Operations with an unknown outcome end after everything else: after
	// every answer and after every call, theirs included. When every node
	// stops at once, the last calls come after the last answer; ending them
	// at the last answer would put their return before their call, which
	// porcupine takes for an operation it cannot linearize.
	var last int64
	for _, op := range ops {
		last = max(last, op.Call)
		if op.Return != math.MaxInt64 {
			last = max(last, op.Return)
		}
	}
	for i := range ops {
		if ops[i].Return == math.MaxInt64 {
			ops[i].Return = last + 1
		}
	}
	res := checkResult{name: "linearizability (porcupine)", checked: len(ops)}
	start := time.Now()
	verdict, info := porcupine.CheckOperationsVerbose(linModel, ops, linCheckTimeout)
	res.took = time.Since(start)
	switch verdict {
	case porcupine.Illegal:
		path := filepath.Join(dir, "linearizability.html")
		if err := porcupine.VisualizePath(linModel, info, path); err != nil {
			res.violations = append(res.violations, fmt.Sprintf("history is not linearizable (writing the visualization: %v)", err))
		} else {
			res.violations = append(res.violations, "history is not linearizable; visualization: "+path)
		}
	case porcupine.Unknown:
		res.undecided = fmt.Sprintf("porcupine could not decide within %v", linCheckTimeout)
	}
	return res
}

// checkResult is what one checker found.
type checkResult struct {
	name       string
	checked    int // operations, grants or writes looked at
	violations []string
	notes      []string
	// undecided, if set, says why the checker could not reach a verdict.
	undecided string
	took      time.Duration
}

// TestLinModelRemembersEveryReleaser: the server remembers each owner's
// release of a key (until it forgets by log position), not only the last
// one, so a repeated release by an earlier releaser may answer 1 after
// another owner held and released the key (seen in TestRollingUpgrade: a
// client retrying its release through a node that was being upgraded);
// a release answered 1 by an owner that never held the key is still illegal.
func TestLinModelRemembersEveryReleaser(t *testing.T) {
	op := func(kind linKind, owner string, ok bool, token uint64) porcupine.Operation {
		return porcupine.Operation{Input: linInput{kind: kind, key: "k", owner: owner}, Output: linOutput{ok: ok, token: token}}
	}
	for _, tc := range []struct {
		name  string
		ops   []porcupine.Operation
		legal bool
	}{
		{"a repeated release after another owner's grant", []porcupine.Operation{
			op(linAcquire, "a", true, 10), op(linRelease, "a", true, 0),
			op(linAcquire, "b", true, 20), op(linRelease, "b", true, 0),
			op(linRelease, "a", true, 0)}, true},
		{"a release answered 1 by an owner that never held", []porcupine.Operation{
			op(linAcquire, "a", true, 10), op(linRelease, "a", true, 0),
			op(linRelease, "c", true, 0)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.ops {
				tc.ops[i].ClientId, tc.ops[i].Call, tc.ops[i].Return = 0, int64(2*i), int64(2*i+1)
			}
			if got := porcupine.CheckOperations(linModel, tc.ops); got != tc.legal {
				t.Fatalf("linearizable: %v, want %v", got, tc.legal)
			}
		})
	}
}
