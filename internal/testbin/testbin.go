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
