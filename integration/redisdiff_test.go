package integration

import (
	"bufio"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/redistest"
	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/rediscompat"
)

// The differential tests: every case of testdata/redisdiff/cases is sent, a
// command at a time, to a real redis-server and to fencer (one node, and a
// three-node cluster through a follower), and the replies are compared one
// by one.
//
// A case file holds cases separated by blank lines. "case NAME" starts one;
// "#" starts a comment. Each other line is a step:
//
//	CMD arg ...     the replies must be equal (errors: their code, the
//	                first word, as Redis adds the script's SHA1 and line)
//	~CMD arg ...    integers may differ by 1500 or 5 % (remaining TTLs)
//	?CMD arg ...    only whether both are errors is compared (TIME, HELLO)
//	!CMD arg ...    a deliberate difference (listed in docs/redlock.md):
//	                both replies are logged, not compared
//	sleep MS        wait (for expiry)
//	keys K ...      more keys to delete after the case (ones a script
//	                touches without naming them in KEYS)
//	on NAME         the steps after it go to the connection NAME (opened
//	                on first use, on both servers); "on main" goes back to
//	                the case's first connection (pub/sub: a subscriber
//	                and a publisher)
//	recv            read the next reply on the connection without sending
//	                anything (a published message, the second
//	                confirmation of a PSUBSCRIBE of two patterns)
//
// Arguments are split on spaces; "..." is a Go-quoted string, '...' a raw
// one, and @path the text of testdata/redisdiff/scripts/path. Every key a
// case touches is deleted on both servers after it.

const redisdiffDir = "testdata/redisdiff"

type diffStep struct {
	line int
	mode byte // 0 exact, '~', '?', '!'
	args []string
	// sleep, if set, is a pause instead of a command.
	sleep time.Duration
	keys  []string
	// on, if set, switches the connection; recv reads a reply.
	on   string
	recv bool
}

type diffCase struct {
	file, name string
	line       int
	steps      []diffStep
}

func loadDiffCases(t *testing.T) []diffCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(redisdiffDir, "cases", "*.cases"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no case files in %s/cases: %v", redisdiffDir, err)
	}
	sort.Strings(files)
	var cases []diffCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cur *diffCase
		for i, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			switch {
			case line == "":
				cur = nil
				continue
			case strings.HasPrefix(line, "#"):
				continue
			case strings.HasPrefix(line, "case "):
				cases = append(cases, diffCase{file: filepath.Base(f), name: strings.TrimPrefix(line, "case "), line: i + 1})
				cur = &cases[len(cases)-1]
				continue
			}
			if cur == nil {
				t.Fatalf("%s:%d: a step outside a case (start one with 'case NAME')", f, i+1)
			}
			st := diffStep{line: i + 1}
			if strings.Contains("~?!", line[:1]) {
				st.mode, line = line[0], line[1:]
			}
			args, err := splitDiffArgs(line)
			if err != nil {
				t.Fatalf("%s:%d: %v", f, i+1, err)
			}
			switch strings.ToLower(args[0]) {
			case "sleep":
				ms, err := strconv.Atoi(args[1])
				if err != nil {
					t.Fatalf("%s:%d: sleep %q", f, i+1, args[1])
				}
				st.sleep = time.Duration(ms) * time.Millisecond
			case "keys":
				st.keys = args[1:]
			case "on":
				st.on = args[1]
			case "recv":
				st.recv = true
			default:
				st.args = args
			}
			cur.steps = append(cur.steps, st)
		}
	}
	return cases
}

// splitDiffArgs splits a step's line into arguments.
func splitDiffArgs(line string) ([]string, error) {
	var args []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		switch line[0] {
		case '"':
			end := 1
			for ; end < len(line) && line[end] != '"'; end++ {
				if line[end] == '\\' {
					end++
				}
			}
			if end >= len(line) {
				return nil, fmt.Errorf("unterminated string in %q", line)
			}
			s, err := strconv.Unquote(line[:end+1])
			if err != nil {
				return nil, err
			}
			args, line = append(args, s), line[end+1:]
		case '\'':
			end := strings.IndexByte(line[1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated string in %q", line)
			}
			args, line = append(args, line[1:end+1]), line[end+2:]
		default:
			tok, rest, _ := strings.Cut(line, " ")
			if strings.HasPrefix(tok, "@") && len(tok) > 1 {
				b, err := os.ReadFile(filepath.Join(redisdiffDir, "scripts", tok[1:]))
				if err != nil {
					return nil, err
				}
				tok = string(b)
			}
			args, line = append(args, tok), rest
		}
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("an empty step")
	}
	return args, nil
}

// diffConn is one connection of the comparison.
type diffConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialDiff(t *testing.T, addr string) *diffConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &diffConn{c: c, r: bufio.NewReader(c)}
}

func (dc *diffConn) do(args ...string) (resp.Value, error) {
	if err := dc.c.SetDeadline(time.Now().Add(requestTimeout)); err != nil {
		return resp.Value{}, err
	}
	if _, err := dc.c.Write(resp.Command(args...)); err != nil {
		return resp.Value{}, err
	}
	return resp.ReadValue(dc.r)
}

// read reads the next reply without sending anything.
func (dc *diffConn) read() (resp.Value, error) {
	if err := dc.c.SetDeadline(time.Now().Add(requestTimeout)); err != nil {
		return resp.Value{}, err
	}
	return resp.ReadValue(dc.r)
}

// diffEqual compares two replies as the step's mode says.
func diffEqual(a, b resp.Value, mode byte) bool {
	isErr := func(v resp.Value) bool { return v.Kind == resp.Error || v.Kind == resp.BlobError }
	if mode == '?' {
		return isErr(a) == isErr(b)
	}
	if isErr(a) || isErr(b) {
		code := func(s string) string { c, _, _ := strings.Cut(s, " "); return c }
		return isErr(a) && isErr(b) && code(a.Str) == code(b.Str)
	}
	if a.Kind != b.Kind || a.IsNull != b.IsNull || len(a.Elems) != len(b.Elems) {
		return false
	}
	if a.Kind == resp.Integer && mode == '~' {
		d := math.Abs(float64(a.Int - b.Int))
		return d <= math.Max(1500, 0.05*math.Max(math.Abs(float64(a.Int)), math.Abs(float64(b.Int))))
	}
	if a.Str != b.Str || a.Int != b.Int {
		return false
	}
	for i := range a.Elems {
		if !diffEqual(a.Elems[i], b.Elems[i], mode) {
			return false
		}
	}
	return true
}

// runDiffCases runs every case against redis and fencer at fencerAddr and
// reports each step whose replies differ.
func runDiffCases(t *testing.T, redisAddr, fencerAddr string) {
	cases := loadDiffCases(t)
	compared, listed := 0, 0
	for _, c := range cases {
		t.Run(c.file+"/"+c.name, func(t *testing.T) {
			r, f := dialDiff(t, redisAddr), dialDiff(t, fencerAddr)
			conns := map[string][2]*diffConn{"main": {r, f}}
			keys := map[string]bool{}
			defer func() {
				for k := range keys {
					_, _ = r.do("DEL", k)
					_, _ = f.do("DEL", k)
				}
			}()
			for _, st := range c.steps {
				if st.sleep > 0 {
					time.Sleep(st.sleep)
					continue
				}
				if st.on != "" {
					if _, ok := conns[st.on]; !ok {
						conns[st.on] = [2]*diffConn{dialDiff(t, redisAddr), dialDiff(t, fencerAddr)}
					}
					r, f = conns[st.on][0], conns[st.on][1]
					continue
				}
				if st.recv {
					rv, rerr := r.read()
					fv, ferr := f.read()
					if rerr != nil || ferr != nil {
						t.Fatalf("%s:%d recv: redis %v, fencer %v", c.file, st.line, rerr, ferr)
					}
					if !diffEqual(rv, fv, st.mode) {
						t.Errorf("%s:%d recv:\n\tredis  %v\n\tfencer %v", c.file, st.line, rv, fv)
					} else {
						compared++
					}
					continue
				}
				for _, k := range st.keys {
					keys[k] = true
				}
				if st.args == nil {
					continue
				}
				b := make([][]byte, len(st.args))
				for i, a := range st.args {
					b[i] = []byte(a)
				}
				for _, k := range rediscompat.KeysOf(b) {
					keys[k] = true
				}
				rv, rerr := r.do(st.args...)
				fv, ferr := f.do(st.args...)
				if rerr != nil || ferr != nil {
					t.Fatalf("%s:%d %s: redis %v, fencer %v", c.file, st.line, shortArgs(st.args), rerr, ferr)
				}
				switch {
				case st.mode == '!':
					listed++
					t.Logf("%s:%d %s: a listed difference: redis %v, fencer %v", c.file, st.line, shortArgs(st.args), rv, fv)
				case !diffEqual(rv, fv, st.mode):
					t.Errorf("%s:%d %s:\n\tredis  %v\n\tfencer %v", c.file, st.line, shortArgs(st.args), rv, fv)
				default:
					compared++
				}
			}
		})
	}
	t.Logf("%d cases, %d replies equal, %d listed differences", len(cases), compared, listed)
}

func shortArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 40 {
			a = a[:37] + "..."
		}
		out[i] = strconv.Quote(a)
	}
	return strings.Join(out, " ")
}

func TestRedisDiffOneNode(t *testing.T) {
	runDiffCases(t, redistest.Start(t).Addr, startFencerd(t).addr)
}

func TestRedisDiffThroughAFollower(t *testing.T) {
	redisAddr := redistest.Start(t).Addr
	c := startNodeCluster(t, 3)
	follower := c.others(c.leader(t))[0]
	runDiffCases(t, redisAddr, c.nodes[follower].addr)
}
