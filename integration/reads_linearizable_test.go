package integration

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Reads of several keys at once, checked for linearizability: MGET and a
// read-only script each read four keys, while writers change two of them in
// one MSET and take and free the other two in one FENCE.MACQUIRE and
// FENCE.MRELEASE. A read that answered parts of two moments (the state
// before a write for one key, after it for another) is a history no order
// explains. docs/safety.md, "Reads".

const (
	// rdOpsPerClient bounds each client's operations, so that porcupine's
	// search stays short.
	rdOpsPerClient = 2000
	rdCheckTimeout = 2 * time.Minute
	rdLockTTL      = time.Minute // no lease runs out during a run
	// rdMaxUnknown bounds each writer's writes of unknown outcome.
	rdMaxUnknown = 1
)

// rdKeys are the keys every read reads: two values, two locks.
var rdKeys = [4]string{"rd:a", "rd:b", "rd:la", "rd:lb"}

// rdScript reads the four keys inside one script.
const rdScript = `return {redis.call('get', KEYS[1]), redis.call('get', KEYS[2]), redis.call('get', KEYS[3]), redis.call('get', KEYS[4])}`

type rdOp uint8

const (
	rdMSet rdOp = iota
	rdAcquire
	rdRelease
	rdMGet
	rdEval
)

var rdOpNames = [...]string{"mset", "macquire", "mrelease", "mget", "eval"}

type rdInput struct {
	op rdOp
	v  string // the value written, or the owner
}

type rdOutput struct {
	unknown bool
	ok      bool      // acquire: granted
	n       int64     // release: how many released
	vals    [4]string // a read: each key's value, "" for none
}

// rdState is the model's state: each key's value ("" for none).
type rdState [4]string

func rdStep(s rdState, in rdInput, out rdOutput) (bool, rdState) {
	switch in.op {
	case rdMSet:
		s[0], s[1] = in.v, in.v
		return true, s
	case rdAcquire:
		free := s[2] == "" && s[3] == ""
		switch {
		case out.unknown:
			// Took effect here, or, linearized after everything else,
			// never.
			if free {
				s[2], s[3] = in.v, in.v
			}
			return true, s
		case out.ok != free:
			return false, s
		case out.ok:
			s[2], s[3] = in.v, in.v
		}
		return true, s
	case rdRelease:
		held := s[2] == in.v && s[3] == in.v
		if !out.unknown && (held && out.n != 2 || !held && out.n != 0) {
			return false, s
		}
		if held {
			s[2], s[3] = "", ""
		}
		return true, s
	}
	return out.vals == s, s
}

var rdModel = porcupine.Model{
	Init: func() any { return rdState{} },
	Step: func(state, input, output any) (bool, any) {
		return rdStep(state.(rdState), input.(rdInput), output.(rdOutput))
	},
	Hash: func(state any) uint64 {
		s := state.(rdState)
		h := fnv.New64a()
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s", s[0], s[1], s[2], s[3])
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in, okIn := input.(rdInput)
		out, okOut := output.(rdOutput)
		if !okIn || !okOut {
			return fmt.Sprintf("%v -> %v", input, output)
		}
		switch {
		case out.unknown:
			return fmt.Sprintf("%s(%s) -> ?", rdOpNames[in.op], in.v)
		case in.op == rdAcquire:
			return fmt.Sprintf("%s(%s) -> %v", rdOpNames[in.op], in.v, out.ok)
		case in.op == rdRelease:
			return fmt.Sprintf("%s(%s) -> %d", rdOpNames[in.op], in.v, out.n)
		case in.op == rdMSet:
			return fmt.Sprintf("%s(%s)", rdOpNames[in.op], in.v)
		}
		return fmt.Sprintf("%s -> %q", rdOpNames[in.op], out.vals)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state.(rdState)) },
}

// rdHistory collects the operations of a run.
type rdHistory struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	// errs counts the definite error replies of reads (NOTLEADER and the
	// like around the transfer): they took no effect and are left out.
	errs map[string]int
}

func (h *rdHistory) now() int64 { return int64(time.Since(h.start)) }

func (h *rdHistory) add(client int, in rdInput, out rdOutput, call, ret int64) {
	if out.unknown {
		ret = math.MaxInt64 // it may take effect at any later time
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

func (h *rdHistory) refused(v any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	code, _, _ := strings.Cut(fmt.Sprint(v), " ")
	h.errs[code]++
}

// rdClient is one connection's loop of operations.
type rdClient struct {
	id   int
	addr string
	h    *rdHistory
	conn net.Conn
	r    *bufio.Reader
}

// call sends args and returns the reply; a transport failure closes the
// connection (the next call dials again) and returns ok false.
func (c *rdClient) call(args ...string) (v any, ok bool) {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.addr, requestTimeout)
		if err != nil {
			return nil, false
		}
		c.conn, c.r = conn, bufio.NewReader(conn)
	}
	v, err := clusterRoundTrip(c.conn, c.r, requestTimeout, args...)
	if err != nil {
		_ = c.conn.Close()
		c.conn = nil
		return nil, false
	}
	return v, true
}

// uncertain reports whether a write's reply leaves its outcome unknown.
func uncertain(v any, ok bool) bool {
	if !ok {
		return true
	}
	e, isErr := v.(respError)
	return isErr && strings.HasPrefix(string(e), "UNCERTAIN")
}

// run does kind's operations until stop is closed or it has done
// rdOpsPerClient of them. A writer client alternates its two writes; a
// reader client alternates MGET and the script.
func (c *rdClient) run(writer rdOp, stop <-chan struct{}, errs chan<- error) {
	defer func() {
		if c.conn != nil {
			_ = c.conn.Close()
		}
	}()
	owner := ""
	unknown := 0
	for i := 0; i < rdOpsPerClient && !stopped(stop); i++ {
		if writer != rdMGet && unknown >= rdMaxUnknown {
			// Each write of unknown outcome may take effect at any
			// later time, which porcupine must try everywhere: a writer
			// that has had enough of them stops writing.
			return
		}
		v := fmt.Sprintf("c%d-%d", c.id, i)
		switch {
		case writer == rdMSet:
			call := c.h.now()
			r, ok := c.call("MSET", rdKeys[0], v, rdKeys[1], v)
			ret := c.h.now()
			switch {
			case uncertain(r, ok):
				c.h.add(c.id, rdInput{rdMSet, v}, rdOutput{unknown: true}, call, ret)
				unknown++
			case r == "OK":
				c.h.add(c.id, rdInput{rdMSet, v}, rdOutput{}, call, ret)
			case clusterRetryable(r):
			default:
				errs <- fmt.Errorf("MSET: %#v", r)
				return
			}
		case writer == rdAcquire && owner == "":
			call := c.h.now()
			r, ok := c.call("FENCE.MACQUIRE", v, fmt.Sprint(rdLockTTL.Milliseconds()), "2", rdKeys[2], rdKeys[3])
			ret := c.h.now()
			switch {
			case uncertain(r, ok):
				c.h.add(c.id, rdInput{rdAcquire, v}, rdOutput{unknown: true}, call, ret)
				owner = v
				unknown++
			case r == nil:
				c.h.add(c.id, rdInput{rdAcquire, v}, rdOutput{}, call, ret)
			case clusterRetryable(r):
			default:
				if _, _, err := parseGrantReply(r); err != nil {
					errs <- fmt.Errorf("FENCE.MACQUIRE: %#v", r)
					return
				}
				c.h.add(c.id, rdInput{rdAcquire, v}, rdOutput{ok: true}, call, ret)
				owner = v
			}
		case writer == rdAcquire:
			call := c.h.now()
			r, ok := c.call("FENCE.MRELEASE", owner, "2", rdKeys[2], rdKeys[3])
			ret := c.h.now()
			n, isInt := r.(int64)
			switch {
			case uncertain(r, ok):
				c.h.add(c.id, rdInput{rdRelease, owner}, rdOutput{unknown: true}, call, ret)
				owner = ""
				unknown++
			case isInt:
				c.h.add(c.id, rdInput{rdRelease, owner}, rdOutput{n: n}, call, ret)
				owner = ""
			case clusterRetryable(r):
			default:
				errs <- fmt.Errorf("FENCE.MRELEASE: %#v", r)
				return
			}
		default:
			op := rdMGet
			args := []string{"MGET", rdKeys[0], rdKeys[1], rdKeys[2], rdKeys[3]}
			if i%2 == 1 {
				op = rdEval
				args = []string{"EVAL", rdScript, "4", rdKeys[0], rdKeys[1], rdKeys[2], rdKeys[3]}
			}
			call := c.h.now()
			r, ok := c.call(args...)
			ret := c.h.now()
			if !ok {
				continue
			}
			a, isArr := r.([]any)
			if !isArr || len(a) != 4 {
				if _, isErr := r.(respError); isErr {
					c.h.refused(r)
					continue
				}
				errs <- fmt.Errorf("%s: %#v", rdOpNames[op], r)
				return
			}
			var out rdOutput
			for k, x := range a {
				switch x := x.(type) {
				case string:
					out.vals[k] = x
				case nil:
				default:
					errs <- fmt.Errorf("%s: %#v", rdOpNames[op], r)
					return
				}
			}
			c.h.add(c.id, rdInput{op, ""}, out, call, ret)
		}
	}
}

// checkReads runs the workload against addrs for up to runFor (calling
// during, if set, halfway) and checks the history.
func checkReads(t *testing.T, addrs []string, runFor time.Duration, during func()) {
	t.Helper()
	h := &rdHistory{start: time.Now(), errs: map[string]int{}}
	stop := make(chan struct{})
	errs := make(chan error, 16)
	roles := []rdOp{rdMSet, rdMSet, rdAcquire, rdAcquire, rdMGet, rdMGet, rdMGet}
	var wg sync.WaitGroup
	for i, role := range roles {
		c := &rdClient{id: i, addr: addrs[i%len(addrs)], h: h}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(role, stop, errs)
		}()
	}
	if during != nil {
		time.Sleep(runFor / 2)
		during()
		h.mu.Lock()
		before := len(h.ops)
		h.mu.Unlock()
		time.Sleep(runFor / 2)
		defer func() {
			if len(h.ops) == before {
				t.Errorf("no operation after the change halfway through")
			}
			t.Logf("%d operations after the change halfway through", len(h.ops)-before)
		}()
	} else {
		time.Sleep(runFor)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	reads, unknown := 0, 0
	for _, op := range h.ops {
		in := op.Input.(rdInput)
		if in.op == rdMGet || in.op == rdEval {
			reads++
		}
		if op.Output.(rdOutput).unknown {
			unknown++
		}
	}
	t.Logf("%d operations (%d reads, %d of unknown outcome) in %v; reads refused: %v",
		len(h.ops), reads, unknown, time.Since(h.start).Round(time.Millisecond), h.errs)
	if reads < 100 {
		t.Fatalf("only %d reads: the run checked too little", reads)
	}
	checkStart := time.Now()
	res, info := porcupine.CheckOperationsVerbose(rdModel, h.ops, rdCheckTimeout)
	t.Logf("porcupine: %v in %v", res, time.Since(checkStart).Round(time.Millisecond))
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		path := t.TempDir() + "/reads.html"
		if err := porcupine.VisualizePath(rdModel, info, path); err == nil {
			t.Logf("the history, drawn: %s", path)
		}
		t.Fatal("the reads are not linearizable")
	default:
		t.Fatalf("porcupine gave no answer within %v", rdCheckTimeout)
	}
}

// TestReadsOfSeveralKeysAreLinearizable: one node, then three nodes with
// the clients spread over all three (followers forward) and leadership
// transferred halfway through the run.
func TestReadsOfSeveralKeysAreLinearizable(t *testing.T) {
	t.Run("one node", func(t *testing.T) {
		d := startFencerd(t)
		checkReads(t, []string{d.addr}, 4*time.Second, nil)
	})
	t.Run("three nodes, leader transfer", func(t *testing.T) {
		c := startNodeCluster(t, 3)
		var addrs []string
		for _, d := range c.nodes {
			addrs = append(addrs, d.addr)
		}
		checkReads(t, addrs, 6*time.Second, func() {
			from := c.leader(t)
			c.transfer(t, from, c.others(from)[0])
		})
	})
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
