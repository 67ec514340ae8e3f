package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// goExamples returns the ```go blocks of a Markdown file, by the line
// each starts on.
func goExamples(t *testing.T, path string) (lines []int, blocks []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	re := regexp.MustCompile("(?ms)^```go\n(.*?)^```$")
	for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
		lines = append(lines, strings.Count(text[:m[0]], "\n")+1)
		blocks = append(blocks, text[m[2]:m[3]])
	}
	return lines, blocks
}

// TestDocsGoExamples runs every program (a ```go block that starts with
// "package main") of docs/client.md as a user would paste it: in a new
// module that uses this one through the replace directive the doc's
// Install section gives, with go mod tidy and go run, against a real
// fencerd. Only the address 127.0.0.1:7379 is replaced by the node's.
func TestDocsGoExamples(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	lines, blocks := goExamples(t, filepath.Join(root, "docs", "client.md"))
	d := startFencerd(t)
	programs := 0
	for i, code := range blocks {
		if !strings.HasPrefix(code, "package main\n") {
			continue
		}
		programs++
		t.Run("line"+strconv.Itoa(lines[i]), func(t *testing.T) {
			dir := t.TempDir()
			gocmd := func(args ...string) string {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, "go", args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("docs/client.md line %d: go %s: %v\n%s\n%s", lines[i], strings.Join(args, " "), err, out, code)
				}
				return string(out)
			}
			gocmd("mod", "init", "example.com/docs")
			gocmd("mod", "edit", "-replace", "github.com/fencerlock/fencer="+root)
			src := strings.ReplaceAll(code, "127.0.0.1:7379", d.addr)
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			gocmd("mod", "tidy")
			out := gocmd("run", ".")
			if strings.TrimSpace(out) == "" {
				t.Fatalf("docs/client.md line %d printed nothing", lines[i])
			}
			t.Logf("docs/client.md line %d:\n%s", lines[i], out)
		})
	}
	if programs < 2 {
		t.Fatalf("docs/client.md has %d programs; want the Install and the safe pattern's at least", programs)
	}
}
