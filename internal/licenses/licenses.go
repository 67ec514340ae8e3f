// Package licenses finds the licences of the Go modules compiled into
// fencer's binaries, from the module graph (go list -deps), checks each
// against the licences fencer's release may carry, and writes their texts
// for the release archives (make release). The classification is
// licenseclassifier's, the classifier go-licenses uses.
package licenses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/google/licenseclassifier/v2/assets"
)

// Allowed are the licences (SPDX identifiers) that a module compiled into
// fencerd or fencer may carry: permissive ones, and MPL-2.0 (hashicorp's
// raft, raft-wal and go-hclog), whose file-level copyleft binds only
// changes to those modules' own files, which fencer does not ship.
// A module under any other licence fails TestThirdPartyLicences until
// someone decides it may ship.
var Allowed = []string{"Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "ISC", "MIT", "MPL-2.0"}

// Go is the name under which the standard library (the Go toolchain's
// licence) is listed: every binary embeds the runtime.
const Go = "go"

// Module is one module compiled into the binaries and its licence.
type Module struct {
	Path    string // module path, or Go for the standard library
	Version string
	Dir     string // where its source is (the module cache, GOROOT)
	// File is its licence file, relative to Dir; empty if none was found.
	File string
	// Licenses are the SPDX identifiers found in File (several for a file
	// that holds more than one licence).
	Licenses []string
}

// Errors of Check.
var (
	ErrNoLicense  = errors.New("licenses: no licence found")
	ErrNotAllowed = errors.New("licenses: licence not allowed")
)

// Modules lists the modules that the packages pkgs (such as
// "./cmd/fencerd") compile into, for each of targets (GOOS/GOARCH: the
// release's, internal/release.Targets), run in the module at root; the
// main module itself is left out. It runs the go command.
func Modules(ctx context.Context, root string, targets []string, pkgs ...string) ([]Module, error) {
	byPath := map[string]Module{}
	for _, target := range targets {
		goos, goarch, _ := strings.Cut(target, "/")
		cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-deps", "-json=ImportPath,Standard,Module"}, pkgs...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("licenses: go list for %s: %v\n%s", target, err, stderr.Bytes())
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p struct {
				ImportPath string
				Standard   bool
				Module     *struct {
					Path, Version, Dir string
					Main               bool
				}
			}
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("licenses: reading go list: %w", err)
			}
			switch {
			case p.Standard:
				byPath[Go] = Module{Path: Go, Version: goVersion(), Dir: goroot()}
			case p.Module != nil && !p.Module.Main:
				byPath[p.Module.Path] = Module{Path: p.Module.Path, Version: p.Module.Version, Dir: p.Module.Dir}
			}
		}
	}
	mods := make([]Module, 0, len(byPath))
	for _, m := range byPath {
		mods = append(mods, m)
	}
	slices.SortFunc(mods, func(a, b Module) int { return strings.Compare(a.Path, b.Path) })
	return mods, nil
}

var (
	goroot    = sync.OnceValue(func() string { return goEnv("GOROOT") })
	goVersion = sync.OnceValue(func() string { return goEnv("GOVERSION") })
)

func goEnv(name string) string {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// licenseFiles are the names a module's licence file goes by, in the
// order they are looked for at the module's root.
var licenseFiles = []string{"LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE", "LICENCE.txt", "COPYING", "License", "license"}

// minConfidence is the classifier's score below which a match is ignored:
// a text that is not close to a known licence is a licence fencer cannot
// name, so it fails Check as missing rather than slip through.
const minConfidence = 0.9

// Classify finds each module's licence file and the licences in it.
func Classify(mods []Module) error {
	c, err := assets.DefaultClassifier()
	if err != nil {
		return fmt.Errorf("licenses: loading the classifier: %w", err)
	}
	for i := range mods {
		m := &mods[i]
		m.File, m.Licenses = "", nil
		for _, name := range licenseFiles {
			b, err := os.ReadFile(filepath.Join(m.Dir, name))
			if err != nil {
				continue
			}
			m.File = name
			for _, match := range c.Match(b).Matches {
				if match.MatchType == "License" && match.Confidence >= minConfidence && !slices.Contains(m.Licenses, match.Name) {
					m.Licenses = append(m.Licenses, match.Name)
				}
			}
			slices.Sort(m.Licenses)
			break
		}
	}
	return nil
}

// Check returns an error naming every module that has no licence file, or
// none that the classifier recognises, or a licence not in allowed.
func Check(mods []Module, allowed []string) error {
	var errs []error
	for _, m := range mods {
		switch {
		case m.File == "":
			errs = append(errs, fmt.Errorf("%w: %s %s has no licence file at its root (%s)", ErrNoLicense, m.Path, m.Version, m.Dir))
		case len(m.Licenses) == 0:
			errs = append(errs, fmt.Errorf("%w: %s %s: %s is no licence the classifier knows", ErrNoLicense, m.Path, m.Version, m.File))
		}
		for _, l := range m.Licenses {
			if !slices.Contains(allowed, l) {
				errs = append(errs, fmt.Errorf("%w: %s %s is under %s, not in %v", ErrNotAllowed, m.Path, m.Version, l, allowed))
			}
		}
	}
	return errors.Join(errs...)
}

// notices are the files beside a licence that it asks to be passed on:
// Apache-2.0's NOTICE, and the patent grant of Go's own modules.
var notices = []string{"NOTICE", "NOTICE.txt", "NOTICE.md", "PATENTS"}

// Write puts each module's licence text under dir, as dir/<module
// path>/<its file name> (with its NOTICE or PATENTS file if it has one),
// and an index, dir/README.md, that lists each
// module, its version and its licences. Check mods first.
func Write(dir string, mods []Module) error {
	var index strings.Builder
	index.WriteString("# Third-party licences\n\n" +
		"fencerd and fencer are built from fencer's own code (Apache-2.0, see LICENSE)\n" +
		"and the Go modules below, compiled into them. Each module's licence text is in\n" +
		"the directory of its module path. The MPL-2.0 modules' source is the module\n" +
		"at the version named, as published.\n\n" +
		"| module | version | licence |\n|---|---|---|\n")
	for _, m := range mods {
		b, err := os.ReadFile(filepath.Join(m.Dir, m.File))
		if err != nil {
			return fmt.Errorf("licenses: %s: %w", m.Path, err)
		}
		out := filepath.Join(dir, filepath.FromSlash(m.Path), m.File)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			return err
		}
		for _, name := range notices {
			if b, err := os.ReadFile(filepath.Join(m.Dir, name)); err == nil {
				if err := os.WriteFile(filepath.Join(filepath.Dir(out), name), b, 0o644); err != nil {
					return err
				}
			}
		}
		fmt.Fprintf(&index, "| %s | %s | %s |\n", m.Path, m.Version, strings.Join(m.Licenses, ", "))
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(index.String()), 0o644)
}
