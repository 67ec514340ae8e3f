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
// the mixed-version tests build as the older release of a data directory
// from before cluster IDs.
const BaselineFile = "testdata/upgrade-from"

// RollingBaselineFile names, from the module root, the file that holds the
// commit the rolling-upgrade test starts its cluster from: the earliest
// build a node-by-node upgrade can start from.
const RollingBaselineFile = "testdata/upgrade-rolling-from"

// Baseline is fencerd and fencer built at a baseline commit.
type Baseline struct {
	Commit  string // the 40-digit commit
	Fencerd string // the daemon's path
	Fencer  string // the command-line tool's path
}

// BuildBaseline builds fencerd at the commit BaselineFile names and returns
// the binary's path (see BuildBaselineOf).
func BuildBaseline() (string, error) {
	b, err := BuildBaselineOf(BaselineFile)
	return b.Fencerd, err
}

// BuildBaselineOf builds fencerd and fencer at the commit that file (a path
// from the module root: BaselineFile, RollingBaselineFile) names: its last
// line that is neither empty nor a # comment. The build is kept, by commit,
// under the user's cache directory (outside the clone), so it is made once
// per machine: the source is taken from the repository with git archive,
// which needs the commit in the clone's history (a shallow clone does not
// have it: the error says so). The binaries are stamped with the commit, so
// INFO's fencer_commit names it.
func BuildBaselineOf(file string) (Baseline, error) {
	root, err := ModuleRoot()
	if err != nil {
		return Baseline{}, err
	}
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return Baseline{}, err
	}
	commit := ""
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			commit = line
		}
	}
	if len(commit) != 40 {
		return Baseline{}, fmt.Errorf("%s: want a 40-digit commit, got %q", file, commit)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return Baseline{}, err
	}
	dir := filepath.Join(cache, "fencer-baseline", commit)
	out := Baseline{Commit: commit, Fencerd: filepath.Join(dir, "fencerd"), Fencer: filepath.Join(dir, "fencer")}
	if _, err := os.Stat(out.Fencerd); err == nil {
		if _, err := os.Stat(out.Fencer); err == nil {
			return out, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Baseline{}, err
	}
	// A directory of its own per build, so that two test processes building
	// the same commit at once do not share one.
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		return Baseline{}, err
	}
	defer os.RemoveAll(src)
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return Baseline{}, fmt.Errorf("taking the source of %s (%s) from the repository: %v\n%s(a shallow clone lacks it: git fetch --unshallow)", commit, file, err, out)
	}
	bin := filepath.Join(src, "bin")
	build := exec.Command("go", "build", "-ldflags", "-X github.com/fencerlock/fencer/internal/version.revision="+commit,
		"-o", bin+"/", "./cmd/fencerd", "./cmd/fencer")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return Baseline{}, fmt.Errorf("building fencerd and fencer at %s: %v\n%s", commit, err, out)
	}
	// fencerd last: its presence says the build is whole.
	for _, name := range []string{"fencer", "fencerd"} {
		if err := os.Rename(filepath.Join(bin, name), filepath.Join(dir, name)); err != nil {
			return Baseline{}, err
		}
	}
	return out, nil
}
