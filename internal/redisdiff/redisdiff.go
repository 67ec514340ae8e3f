// Package redisdiff is the differential corpus of fencer's Redis
// compatibility: cases of Redis traffic (integration/testdata/redisdiff),
// Redis's replies to them recorded as test data (rediscompat/testdata/
// replies), and the comparison of a server's replies with Redis's. Three
// runs read it: the live one (integration: a real redis-server beside
// fencer), the offline one (go test ./rediscompat: fencer against the
// recorded replies) and the recording (make redisdiff-record).
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
//	                on first use); "on main" goes back to the case's first
//	                connection (pub/sub: a subscriber and a publisher)
//	recv            read the next reply on the connection without sending
//	                anything (a published message, the second
//	                confirmation of a PSUBSCRIBE of two patterns)
//
// Arguments are split on spaces; "..." is a Go-quoted string, '...' a raw
// one, and @path the text of scripts/path beside the cases. Every key a
// case touches is deleted after it.
package redisdiff

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/rediscompat"
)

// Step is one line of a case.
type Step struct {
	Line int
	Mode byte // 0 exact, '~', '?', '!'
	Args []string
	// Sleep, if set, is a pause instead of a command.
	Sleep time.Duration
	Keys  []string
	// On, if set, switches the connection; Recv reads a reply.
	On   string
	Recv bool
}

// Replies reports whether the step has a reply: a command or a recv.
func (s Step) Replies() bool { return s.Args != nil || s.Recv }

// Case is one case of a case file.
type Case struct {
	File, Name string
	Line       int
	Steps      []Step
}

// Load reads every case file of dir/cases (scripts from dir/scripts).
func Load(dir string) ([]Case, error) {
	files, err := filepath.Glob(filepath.Join(dir, "cases", "*.cases"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("redisdiff: no case files in %s/cases: %v", dir, err)
	}
	sort.Strings(files)
	var cases []Case
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		cs, err := parse(filepath.Base(f), string(b), filepath.Join(dir, "scripts"))
		if err != nil {
			return nil, fmt.Errorf("redisdiff: %s%w", filepath.Dir(f)+"/", err)
		}
		cases = append(cases, cs...)
	}
	return cases, nil
}

func parse(file, text, scripts string) ([]Case, error) {
	var cases []Case
	var cur *Case
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			cur = nil
			continue
		case strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "case "):
			cases = append(cases, Case{File: file, Name: strings.TrimPrefix(line, "case "), Line: i + 1})
			cur = &cases[len(cases)-1]
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("%s:%d: a step outside a case (start one with 'case NAME')", file, i+1)
		}
		st := Step{Line: i + 1}
		if strings.Contains("~?!", line[:1]) {
			st.Mode, line = line[0], line[1:]
		}
		args, err := splitArgs(line, scripts)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", file, i+1, err)
		}
		switch strings.ToLower(args[0]) {
		case "sleep":
			ms, err := strconv.Atoi(args[1])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: sleep %q", file, i+1, args[1])
			}
			st.Sleep = time.Duration(ms) * time.Millisecond
		case "keys":
			st.Keys = args[1:]
		case "on":
			st.On = args[1]
		case "recv":
			st.Recv = true
		default:
			st.Args = args
		}
		cur.Steps = append(cur.Steps, st)
	}
	return cases, nil
}

// splitArgs splits a step's line into arguments.
func splitArgs(line, scripts string) ([]string, error) {
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
				b, err := os.ReadFile(filepath.Join(scripts, tok[1:]))
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

// stepTimeout bounds one reply.
const stepTimeout = 10 * time.Second

// conn is one connection of a case.
type conn struct {
	c net.Conn
	r *bufio.Reader
}

func dial(addr string) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{c: c, r: bufio.NewReader(c)}, nil
}

func (c *conn) do(args ...string) ([]byte, error) {
	if err := c.c.SetDeadline(time.Now().Add(stepTimeout)); err != nil {
		return nil, err
	}
	if _, err := c.c.Write(resp.Command(args...)); err != nil {
		return nil, err
	}
	return resp.ReadRaw(c.r)
}

func (c *conn) read() ([]byte, error) {
	if err := c.c.SetDeadline(time.Now().Add(stepTimeout)); err != nil {
		return nil, err
	}
	return resp.ReadRaw(c.r)
}

// Play runs c against the server at addr, a step at a time, and returns
// the raw reply of each command and recv step by its line. It deletes every
// key the case touched, after it.
func Play(c Case, addr string) (map[int][]byte, error) {
	main, err := dial(addr)
	if err != nil {
		return nil, err
	}
	conns := map[string]*conn{"main": main}
	defer func() {
		for _, cn := range conns {
			_ = cn.c.Close()
		}
	}()
	keys := map[string]bool{}
	defer func() {
		if cl, err := dial(addr); err == nil {
			for k := range keys {
				_, _ = cl.do("DEL", k)
			}
			_ = cl.c.Close()
		}
	}()
	replies := make(map[int][]byte)
	cur := main
	for _, st := range c.Steps {
		switch {
		case st.Sleep > 0:
			time.Sleep(st.Sleep)
			continue
		case st.On != "":
			if conns[st.On] == nil {
				if conns[st.On], err = dial(addr); err != nil {
					return nil, err
				}
			}
			cur = conns[st.On]
			continue
		case st.Recv:
			if replies[st.Line], err = cur.read(); err != nil {
				return nil, fmt.Errorf("%s:%d recv: %w", c.File, st.Line, err)
			}
			continue
		}
		for _, k := range st.Keys {
			keys[k] = true
		}
		if st.Args == nil {
			continue
		}
		b := make([][]byte, len(st.Args))
		for i, a := range st.Args {
			b[i] = []byte(a)
		}
		for _, k := range rediscompat.KeysOf(b) {
			keys[k] = true
		}
		if replies[st.Line], err = cur.do(st.Args...); err != nil {
			return nil, fmt.Errorf("%s:%d %s: %w", c.File, st.Line, ShortArgs(st.Args), err)
		}
	}
	return replies, nil
}

// Equal compares two replies as a step's mode says.
func Equal(a, b resp.Value, mode byte) bool {
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
		if !Equal(a.Elems[i], b.Elems[i], mode) {
			return false
		}
	}
	return true
}

// Result is the comparison of one case's replies.
type Result struct {
	// Compared counts the replies found equal; Listed the deliberate
	// differences, logged in Notes.
	Compared, Listed int
	// Diffs are the steps whose replies differ; Notes the listed
	// differences.
	Diffs, Notes []string
}

// Compare compares got (a server's replies to c) with want (Redis's).
func Compare(c Case, want, got map[int][]byte) Result {
	var r Result
	for _, st := range c.Steps {
		if !st.Replies() {
			continue
		}
		what := "recv"
		if !st.Recv {
			what = ShortArgs(st.Args)
		}
		wv, werr := parseReply(want[st.Line])
		gv, gerr := parseReply(got[st.Line])
		switch {
		case werr != nil || gerr != nil:
			r.Diffs = append(r.Diffs, fmt.Sprintf("%s:%d %s: redis %v, fencer %v", c.File, st.Line, what, werr, gerr))
		case st.Mode == '!':
			r.Listed++
			r.Notes = append(r.Notes, fmt.Sprintf("%s:%d %s: a listed difference: redis %v, fencer %v", c.File, st.Line, what, wv, gv))
		case !Equal(wv, gv, st.Mode):
			r.Diffs = append(r.Diffs, fmt.Sprintf("%s:%d %s:\n\tredis  %v\n\tfencer %v", c.File, st.Line, what, wv, gv))
		default:
			r.Compared++
		}
	}
	return r
}

func parseReply(raw []byte) (resp.Value, error) {
	if raw == nil {
		return resp.Value{}, errors.New("no reply")
	}
	return resp.ReadValue(bufio.NewReader(bytes.NewReader(raw)))
}

// ShortArgs is a step's arguments, quoted and shortened, for a message.
func ShortArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 40 {
			a = a[:37] + "..."
		}
		out[i] = strconv.Quote(a)
	}
	return strings.Join(out, " ")
}

// Recorded replies: one file per case file, FILE.replies, of lines
//
//	redis_version 7.0.15
//	sha256 <hex of every line after this one>
//	<step line> <the raw reply, Go-quoted>
//
// after a comment saying how it was made. The digest makes a file edited
// by hand fail to load: a recorded reply changes only by recording again.

// RecordedMajor is the Redis major version the replies are recorded from:
// recording from another is refused, as its replies may differ.
const RecordedMajor = 7

// Recording is Redis's replies to the cases of one case file.
type Recording struct {
	RedisVersion string
	Replies      map[string]map[int][]byte // by case name, then step line
}

// Record writes rec for the case file named file into dir.
func Record(dir, file string, rec Recording) error {
	var body bytes.Buffer
	names := make([]string, 0, len(rec.Replies))
	for n := range rec.Replies {
		names = append(names, n)
	}
	sort.Strings(names)
	type line struct {
		n   int
		raw []byte
	}
	var lines []line
	for _, n := range names {
		for l, raw := range rec.Replies[n] {
			lines = append(lines, line{l, raw})
		}
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i].n < lines[j].n })
	for _, l := range lines {
		fmt.Fprintf(&body, "%d %s\n", l.n, strconv.Quote(string(l.raw)))
	}
	sum := sha256.Sum256(body.Bytes())
	var out bytes.Buffer
	fmt.Fprintf(&out, "# Redis's replies to %s, recorded by make redisdiff-record from a real\n# redis-server; do not edit (the digest below refuses a changed line).\n", file)
	fmt.Fprintf(&out, "redis_version %s\nsha256 %s\n", rec.RedisVersion, hex.EncodeToString(sum[:]))
	out.Write(body.Bytes())
	return os.WriteFile(filepath.Join(dir, strings.TrimSuffix(file, ".cases")+".replies"), out.Bytes(), 0o644)
}

// ReadRecording reads the replies recorded for the case file named file:
// the Redis version, and each reply by its step line.
func ReadRecording(dir, file string) (version string, replies map[int][]byte, err error) {
	path := filepath.Join(dir, strings.TrimSuffix(file, ".cases")+".replies")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("redisdiff: %w (make redisdiff-record records Redis's replies)", err)
	}
	var sum string
	replies = make(map[int][]byte)
	var body bytes.Buffer
	for i, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "redis_version "):
			version = strings.TrimPrefix(l, "redis_version ")
		case strings.HasPrefix(l, "sha256 "):
			sum = strings.TrimPrefix(l, "sha256 ")
		default:
			body.WriteString(l + "\n")
			n, q, ok := strings.Cut(l, " ")
			line, err := strconv.Atoi(n)
			raw, qerr := strconv.Unquote(q)
			if !ok || err != nil || qerr != nil {
				return "", nil, fmt.Errorf("redisdiff: %s:%d: want <step line> <quoted reply>", path, i+1)
			}
			replies[line] = []byte(raw)
		}
	}
	got := sha256.Sum256(body.Bytes())
	if version == "" || sum != hex.EncodeToString(got[:]) {
		return "", nil, fmt.Errorf("redisdiff: %s: its digest does not match its replies (edited by hand?); record them again with make redisdiff-record", path)
	}
	return version, replies, nil
}

// CheckRecordable refuses to record from a Redis whose major version is
// not RecordedMajor.
func CheckRecordable(version string) error {
	if major, err := Major(version); err != nil || major != RecordedMajor {
		return fmt.Errorf("redis-server %s is not Redis %d: the replies are recorded from Redis %d only (replies differ between major versions)",
			version, RecordedMajor, RecordedMajor)
	}
	return nil
}

// Major is the major version of a Redis version string ("7.0.15": 7).
func Major(version string) (int, error) {
	m, _, _ := strings.Cut(version, ".")
	return strconv.Atoi(m)
}
