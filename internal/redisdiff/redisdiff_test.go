package redisdiff

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRecordingRoundTripsAndRefusesAnEdit(t *testing.T) {
	dir := t.TempDir()
	rec := Recording{RedisVersion: "7.0.15", Replies: map[string]map[int][]byte{
		"a": {3: []byte("+OK\r\n"), 4: []byte(":1\r\n")},
		"b": {9: []byte("$-1\r\n")},
	}}
	if err := Record(dir, "x.cases", rec); err != nil {
		t.Fatal(err)
	}
	v, got, err := ReadRecording(dir, "x.cases")
	if err != nil || v != "7.0.15" || len(got) != 3 || string(got[4]) != ":1\r\n" || string(got[9]) != "$-1\r\n" {
		t.Fatalf("read back %q %v %v", v, got, err)
	}
	path := filepath.Join(dir, "x.replies")
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), `":1\r\n"`, `":2\r\n"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadRecording(dir, "x.cases"); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("an edited reply was read: %v", err)
	}
}

func TestRecordingRefusesAnotherMajorVersion(t *testing.T) {
	for v, ok := range map[string]bool{"7.0.15": true, "7.2.4": true, "6.2.14": false, "8.0.0": false, "x": false} {
		if err := CheckRecordable(v); (err == nil) != ok {
			t.Errorf("CheckRecordable(%q) = %v, want ok %v", v, err, ok)
		}
	}
}

func TestParseSteps(t *testing.T) {
	cs, err := parse("f.cases", "# c\ncase one\nSET k \"a b\" 'c d'\n~PTTL k\nsleep 10\non sub\nrecv\n\ncase two\n!TIME\n", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || len(cs[0].Steps) != 5 || cs[0].Steps[0].Args[2] != "a b" || cs[0].Steps[0].Args[3] != "c d" ||
		cs[0].Steps[1].Mode != '~' || cs[0].Steps[3].On != "sub" || !cs[0].Steps[4].Recv || cs[1].Steps[0].Mode != '!' {
		t.Fatalf("parsed %+v", cs)
	}
}
