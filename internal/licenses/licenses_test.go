package licenses

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fencerlock/fencer/internal/release"
	"github.com/fencerlock/fencer/internal/testbin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every module compiled into fencerd and fencer, on every release target,
// has a licence file whose licences are all on the allowed list.
func TestThirdPartyLicences(t *testing.T) {
	root, err := testbin.ModuleRoot()
	require.NoError(t, err)
	targets, err := release.Targets(root)
	require.NoError(t, err)
	mods, err := Modules(t.Context(), root, targets, "./cmd/fencerd", "./cmd/fencer")
	require.NoError(t, err)
	require.NoError(t, Classify(mods))
	paths := make([]string, 0, len(mods))
	for _, m := range mods {
		paths = append(paths, m.Path)
		t.Logf("%s %s: %s %v", m.Path, m.Version, m.File, m.Licenses)
	}
	for _, want := range []string{Go, "github.com/hashicorp/raft", "github.com/hashicorp/raft-wal", "github.com/hashicorp/go-hclog", "github.com/tidwall/redcon"} {
		assert.Contains(t, paths, want, "the module graph as go list reports it")
	}
	assert.NotContains(t, paths, "github.com/stretchr/testify", "test-only modules are not compiled in")
	require.NoError(t, Check(mods, Allowed))
}

// Check refuses a module without a licence file, with a text the
// classifier does not know, or with a licence off the list.
func TestCheckRefuses(t *testing.T) {
	dir := t.TempDir()
	bsd, err := os.ReadFile(filepath.Join(goroot(), "LICENSE"))
	require.NoError(t, err)
	write := func(mod, name string, text []byte) string {
		d := filepath.Join(dir, mod)
		require.NoError(t, os.MkdirAll(d, 0o755))
		if name != "" {
			require.NoError(t, os.WriteFile(filepath.Join(d, name), text, 0o644))
		}
		return d
	}
	mods := []Module{
		{Path: "example.com/ok", Dir: write("ok", "LICENSE", bsd)},
		{Path: "example.com/none", Dir: write("none", "", nil)},
		{Path: "example.com/unknown", Dir: write("unknown", "COPYING", []byte("You may do as you like, on Tuesdays.\n"))},
	}
	require.NoError(t, Classify(mods))
	assert.Equal(t, []string{"BSD-3-Clause"}, mods[0].Licenses, "Go's own licence")
	err = Check(mods, Allowed)
	assert.ErrorIs(t, err, ErrNoLicense)
	assert.ErrorContains(t, err, "example.com/none  has no licence file")
	assert.ErrorContains(t, err, "example.com/unknown : COPYING is no licence the classifier knows")
	assert.NotContains(t, err.Error(), "example.com/ok")

	err = Check(mods[:1], slices.DeleteFunc(slices.Clone(Allowed), func(l string) bool { return l == "BSD-3-Clause" }))
	assert.ErrorIs(t, err, ErrNotAllowed)
	assert.ErrorContains(t, err, "example.com/ok  is under BSD-3-Clause")

	out := t.TempDir()
	require.NoError(t, Write(out, mods[:1]))
	b, err := os.ReadFile(filepath.Join(out, "example.com", "ok", "LICENSE"))
	require.NoError(t, err)
	assert.Equal(t, bsd, b)
	idx, err := os.ReadFile(filepath.Join(out, "README.md"))
	require.NoError(t, err)
	assert.Contains(t, string(idx), "| example.com/ok |  | BSD-3-Clause |")
}
