// Package testbin builds this module's commands for the tests that run them
// as processes (integration, integration/chaos, internal/bench).
package testbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Build compiles the command in pkg, a directory of this module such as
// "cmd/fencerd", to the file out, with flags added to go build (-tags,
// -race).
func Build(out, pkg string, flags ...string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	args := append(append([]string{"build", "-o", out}, flags...), "./"+pkg)
	build := exec.Command("go", args...)
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go %q in %s: %v\n%s", args, root, err, b)
	}
	return nil
}

// BuildFencerd builds fencerd into dir twice: as shipped, and with -tags
// fencer_faults, which behaves as shipped unless FENCER_FAULTS names a
// fault to inject (server/faults_enabled.go). flags go to both builds.
func BuildFencerd(dir string, flags ...string) (shipped, faulty string, err error) {
	shipped, faulty = filepath.Join(dir, "fencerd"), filepath.Join(dir, "fencerd-faults")
	faultFlags := append(slices.Clip(flags), "-tags", "fencer_faults")
	err = errors.Join(Build(shipped, "cmd/fencerd", flags...), Build(faulty, "cmd/fencerd", faultFlags...))
	return shipped, faulty, err
}

// ModuleRoot returns the nearest directory at or above the working
// directory (the package directory under go test) that holds go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod found above the package directory")
		}
		dir = parent
	}
}

// BaselineFile names, from the module root, the file that holds the commit
// the mixed-version tests build as the older release.
const BaselineFile = "testdata/upgrade-from"

// BuildBaseline builds fencerd at the commit BaselineFile names and returns
// the binary's path. The build is kept, by commit, under the user's cache
// directory (outside the clone), so it is made once per machine: the source
// is taken from the repository with git archive, which needs the commit in
// the clone's history (a shallow clone does not have it: the error says so).
func BuildBaseline() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, BaselineFile))
	if err != nil {
		return "", err
	}
	commit := ""
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			commit = line
		}
	}
	if len(commit) != 40 {
		return "", fmt.Errorf("%s: want a 40-digit commit, got %q", BaselineFile, commit)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "fencer-baseline", commit)
	bin := filepath.Join(dir, "fencerd")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	src := filepath.Join(dir, "src")
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("taking the source of %s (%s) from the repository: %v\n%s(a shallow clone lacks it: git fetch --unshallow)", commit, BaselineFile, err, out)
	}
	build := exec.Command("go", "build", "-o", bin+".tmp", "./cmd/fencerd")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building fencerd at %s: %v\n%s", commit, err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		return "", err
	}
	_ = os.RemoveAll(src)
	return bin, nil
}
