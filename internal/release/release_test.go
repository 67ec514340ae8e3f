package release

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/fencerlock/fencer/internal/testbin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fencerd and fencer compile, statically, for every platform a release
// ships, as make release builds them.
func TestCommandsBuildForEveryReleaseTarget(t *testing.T) {
	root, err := testbin.ModuleRoot()
	require.NoError(t, err)
	targets, err := Targets(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}, targets)
	for _, target := range targets {
		goos, goarch, _ := strings.Cut(target, "/")
		t.Run(goos+"-"+goarch, func(t *testing.T) {
			// Two packages: go build compiles them and discards the
			// result, a check that they build.
			c := exec.CommandContext(t.Context(), "go", "build", "./cmd/fencerd", "./cmd/fencer")
			c.Dir = root
			c.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
			out, err := c.CombinedOutput()
			assert.NoError(t, err, "%s for %s:\n%s", strings.Join(c.Args, " "), target, out)
		})
	}
}
