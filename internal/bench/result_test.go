package bench

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestSchemaMatchesPeerbench compares Result's JSON names, in order, with
// peerbench's Result, when shared/peerbench sits beside the repository (as
// it does on the development machines and in CI).
func TestSchemaMatchesPeerbench(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "peerbench", "bench.go"))
	if err != nil {
		t.Skipf("peerbench not found beside the repository: %v", err)
	}
	body := string(src)
	start := strings.Index(body, "type Result struct {")
	if start < 0 {
		t.Fatal("peerbench's bench.go has no Result struct")
	}
	body = body[start:]
	body = body[:strings.Index(body, "\n}")]
	var want []string
	for _, m := range regexp.MustCompile(`json:"([^"]*)"`).FindAllStringSubmatch(body, -1) {
		want = append(want, m[1])
	}
	var got []string
	rt := reflect.TypeFor[Result]()
	for i := range rt.NumField() {
		got = append(got, rt.Field(i).Tag.Get("json"))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Result's JSON fields differ from peerbench's:\n got %q\nwant %q", got, want)
	}
}
