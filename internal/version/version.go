// Package version is fencer's version: one constant for the release, and
// the commit and the commit's time that the Go toolchain stamps into a
// binary built from a git checkout (or that -ldflags sets when there is no
// checkout). fencerd --version, fencer version, INFO and the
// fencer_build_info metric all read it from here.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// Version is the release this source tree makes, without the leading "v"
// of its git tag. make release refuses a tag on HEAD that says otherwise,
// so the constant is the one place a release is named. CHANGELOG.md lists
// what each release changed.
const Version = "0.1.0"

// Set with -ldflags "-X github.com/fencerlock/fencer/internal/version.revision=..."
// (and commitTime, RFC 3339, and modified, "true") where the toolchain
// stamps no vcs.* settings: with -buildvcs=false, outside a checkout, or in
// a git worktree, which go build does not recognise. The Makefile always
// sets them from git. Stamped values win when present.
var (
	revision   string
	commitTime string
	modified   string
)

// Info describes the running binary.
type Info struct {
	// Version is the constant Version.
	Version string
	// Revision is the full commit hash the binary was built from, or ""
	// when it is unknown (go run, go test, a build outside a checkout).
	Revision string
	// Time is the commit's time (not the build's), RFC 3339 in UTC, or "".
	Time string
	// Modified reports that the checkout had uncommitted changes.
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
	// Platform is GOOS/GOARCH.
	Platform string
}

var get = sync.OnceValue(func() Info {
	info := Info{Version: Version, Revision: revision, Time: commitTime, Modified: modified == "true",
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info = fromBuildInfo(info, bi.Settings)
	}
	return info
})

// Get returns the running binary's Info.
func Get() Info { return get() }

// fromBuildInfo fills info from the vcs.* settings the toolchain stamped.
func fromBuildInfo(info Info, settings []debug.BuildSetting) Info {
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	if t, err := time.Parse(time.RFC3339, info.Time); err == nil {
		info.Time = t.UTC().Format(time.RFC3339)
	}
	return info
}

// ShortRevision is the first 12 hex digits of Revision (as Go's
// pseudo-versions), with "+dirty" when Modified, or "unknown".
func (i Info) ShortRevision() string {
	r := i.Revision
	if r == "" {
		return "unknown"
	}
	if len(r) > 12 {
		r = r[:12]
	}
	if i.Modified {
		r += "+dirty"
	}
	return r
}

// String is the one line fencerd --version and fencer version print after
// the program's name: "0.1.0 (commit 72bf1b7c1d2e, 2026-11-28T04:00:00Z,
// go1.26.8 linux/amd64)".
func (i Info) String() string {
	when := ""
	if i.Time != "" {
		when = ", " + i.Time
	}
	return fmt.Sprintf("%s (commit %s%s, %s %s)", i.Version, i.ShortRevision(), when, i.GoVersion, i.Platform)
}
