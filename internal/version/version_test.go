package version

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInfoFromBuildSettings(t *testing.T) {
	base := Info{Version: "0.1.0", GoVersion: "go1.26.8", Platform: "linux/amd64"}
	for _, tc := range []struct {
		name     string
		settings []debug.BuildSetting
		want     string
	}{
		{"stamped", []debug.BuildSetting{{Key: "vcs.revision", Value: "72bf1b7c1d2e3f405162738495a6b7c8d9e0f112"},
			{Key: "vcs.time", Value: "2026-11-28T05:00:00+01:00"}, {Key: "vcs.modified", Value: "false"}},
			"0.1.0 (commit 72bf1b7c1d2e, 2026-11-28T04:00:00Z, go1.26.8 linux/amd64)"},
		{"modified", []debug.BuildSetting{{Key: "vcs.revision", Value: "72bf1b7c1d2e3f40"}, {Key: "vcs.modified", Value: "true"}},
			"0.1.0 (commit 72bf1b7c1d2e+dirty, go1.26.8 linux/amd64)"},
		{"none", nil, "0.1.0 (commit unknown, go1.26.8 linux/amd64)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, fromBuildInfo(base, tc.settings).String())
		})
	}
}

// Values set by -ldflags stand when the toolchain stamped none.
func TestLdflagsValuesWithoutStamp(t *testing.T) {
	base := Info{Version: "0.1.0", Revision: "abc", Time: "2026-01-02T03:04:05Z", GoVersion: "go1", Platform: "p"}
	assert.Equal(t, "0.1.0 (commit abc, 2026-01-02T03:04:05Z, go1 p)", fromBuildInfo(base, nil).String())
}

func TestGetIsTheConstant(t *testing.T) {
	assert.Equal(t, Version, Get().Version)
	assert.NotEmpty(t, Get().GoVersion)
}
