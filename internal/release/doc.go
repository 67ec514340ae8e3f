// Package release holds the tests of fencer's release build
// (scripts/release.sh, make release): that fencerd and fencer compile for
// every platform a release ships. Its targets are the script's TARGETS,
// their one home; Targets reads them.
package release

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var targetsLine = regexp.MustCompile(`(?m)^TARGETS="([^"]+)"$`)

// Targets returns the GOOS/GOARCH pairs that scripts/release.sh, under
// the module root, builds.
func Targets(root string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "scripts", "release.sh"))
	if err != nil {
		return nil, err
	}
	m := targetsLine.FindSubmatch(b)
	if m == nil {
		return nil, errors.New("release: no TARGETS=\"...\" line in scripts/release.sh")
	}
	return strings.Fields(string(m[1])), nil
}
