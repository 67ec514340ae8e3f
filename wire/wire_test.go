package wire_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fencerlock/fencer/wire"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  wire.Error
	}{
		{"UNCERTAIN outcome unknown: x", wire.Error{Code: wire.Uncertain, Text: "outcome unknown: x"}},
		{"ERR syntax error", wire.Error{Code: wire.Err, Text: "syntax error"}},
		{"NOTBUSY", wire.Error{Code: wire.NotBusy}},
		{"", wire.Error{}},
	} {
		t.Run(tc.reply, func(t *testing.T) {
			got := wire.Parse(tc.reply)
			if got != tc.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tc.reply, got, tc.want)
			}
			if got.String() != tc.reply {
				t.Errorf("String() = %q, want %q", got.String(), tc.reply)
			}
		})
	}
}

func TestNotLeaderRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		id, addr string
		words    [2]string // the fields as written
	}{
		{"node-2", "127.0.0.1:7379", [2]string{"node-2", "127.0.0.1:7379"}},
		{"n2", "[::1]:7379", [2]string{"n2", "[::1]:7379"}},
		{"n2", "", [2]string{"n2", "-"}},
		{"", "", [2]string{"-", "-"}},
		{"-", "h:1", [2]string{"%2D", "h:1"}},
		{"a b\tc", "h:1", [2]string{"a%20b%09c", "h:1"}},
		{"100%", "h:1", [2]string{"100%25", "h:1"}},
		{"nœud", "h:1", [2]string{"n%C5%93ud", "h:1"}},
	} {
		t.Run(tc.id+"/"+tc.addr, func(t *testing.T) {
			e := wire.FormatNotLeader(tc.id, tc.addr)
			words := strings.Fields(e.String())
			if len(words) < 4 || words[0] != "NOTLEADER" || words[1] != tc.words[0] || words[2] != tc.words[1] {
				t.Fatalf("FormatNotLeader(%q, %q) = %q: want NOTLEADER %s %s <text>", tc.id, tc.addr, e, tc.words[0], tc.words[1])
			}
			id, addr, ok := wire.ParseNotLeader(wire.Parse(e.String()))
			if !ok || id != tc.id || addr != tc.addr {
				t.Errorf("ParseNotLeader(%q) = %q, %q, %v; want %q, %q, true", e, id, addr, ok, tc.id, tc.addr)
			}
		})
	}
}

func TestParseNotLeaderRefusesMalformed(t *testing.T) {
	for _, reply := range []string{
		"NOTLEADER",
		"NOTLEADER n2",
		"NOTLEADER n2 notanaddress text",
		"NOTLEADER n%2 h:1 text",
		"NOTLEADER n%ZZ h:1 text",
		"NOLEADER n2 h:1 text",
	} {
		if id, addr, ok := wire.ParseNotLeader(wire.Parse(reply)); ok {
			t.Errorf("ParseNotLeader(%q) = %q, %q, true; want not ok", reply, id, addr)
		}
	}
}

func TestCodes(t *testing.T) {
	seen := map[wire.Code]bool{}
	for _, c := range wire.Codes() {
		if !c.Known() || seen[c] || c == "" || strings.ToUpper(string(c)) != string(c) || strings.ContainsAny(string(c), " -") {
			t.Errorf("code %q: want a known, unique, upper-case word", c)
		}
		seen[c] = true
	}
	for _, c := range []wire.Code{"", "OK", "BUSY", "err"} {
		if c.Known() {
			t.Errorf("%q.Known() = true", c)
		}
	}
	wire.Codes()[0] = "CHANGED"
	if wire.Codes()[0] == "CHANGED" {
		t.Error("Codes returns its own slice")
	}
}

func ExampleParseNotLeader() {
	reply := "NOTLEADER node-2 127.0.0.1:7379 not the leader: send commands to the leader"
	e := wire.Parse(reply)
	id, addr, ok := wire.ParseNotLeader(e)
	fmt.Println(e.Code, id, addr, ok)
	fmt.Println(wire.FormatNotLeader("node-2", ""))
	// Output:
	// NOTLEADER node-2 127.0.0.1:7379 true
	// NOTLEADER node-2 - not the leader, and the leader's client address is not known yet: retry later
}

func TestInvalidArgumentRoundTrip(t *testing.T) {
	e := wire.FormatInvalidArgument("wait", "1h0m0s is outside 0s..1m0s")
	if got, want := e.String(), "ERR invalid argument: wait: 1h0m0s is outside 0s..1m0s"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	arg, reason, ok := wire.ParseInvalidArgument(wire.Parse(e.String()))
	if !ok || arg != "wait" || reason != "1h0m0s is outside 0s..1m0s" {
		t.Errorf("ParseInvalidArgument = %q, %q, %v", arg, reason, ok)
	}
	for _, r := range []string{"ERR syntax error", "ERR invalid argument: no colon", "WRONGTYPE invalid argument: wait: x", "ERR invalid argument: two words: x"} {
		if _, _, ok := wire.ParseInvalidArgument(wire.Parse(r)); ok {
			t.Errorf("ParseInvalidArgument(%q) is ok", r)
		}
	}
}
