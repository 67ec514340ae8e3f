package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// configure returns the config that args, then env, then the config file
// they name set, as fencerd applies them.
func configure(t *testing.T, env map[string]string, args ...string) (*config, error) {
	t.Helper()
	c := defaultConfig()
	cmd := &cobra.Command{}
	c.bindFlags(cmd)
	require.NoError(t, cmd.ParseFlags(args))
	err := applySources(cmd.Flags(), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return c, err
}

// writeFile writes text to a new file and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// Each setting comes from the first source that has it: the command line,
// the environment, the file, the default.
func TestSettingsPrecedence(t *testing.T) {
	file := writeFile(t, "fencerd.yaml", `# every source sets max-args; all but the flag set max-ttl
listen: 127.0.0.1:9000
max-ttl: 2h
max-args: 10
join:
  - 10.0.0.5:7379
  - 10.0.0.7:7379
protected-mode: false
log-format: json
`)
	env := map[string]string{"FENCER_MAX_TTL": "3h", "FENCER_MAX_ARGS": "20", "FENCER_ADDR": "ignored:1"}
	c, err := configure(t, env, "--config", file, "--max-args", "30")
	require.NoError(t, err)
	assert.Equal(t, 30, c.bridge.MaxArgs, "the flag wins")
	assert.Equal(t, 3*time.Hour, c.node.MaxTTL, "the environment wins over the file")
	assert.Equal(t, "127.0.0.1:9000", c.listen, "the file wins over the default")
	assert.Equal(t, []string{"10.0.0.5:7379", "10.0.0.7:7379"}, c.join)
	assert.False(t, c.protected)
	assert.Equal(t, "json", c.logFormat)
	assert.Equal(t, time.Hour, c.node.MaxWait, "the default")

	// FENCER_CONFIG names the file when --config does not.
	c, err = configure(t, map[string]string{"FENCER_CONFIG": file})
	require.NoError(t, err)
	assert.Equal(t, 2*time.Hour, c.node.MaxTTL)
	assert.Equal(t, 10, c.bridge.MaxArgs)

	// A list from the environment is comma-separated, as on the command line.
	c, err = configure(t, map[string]string{"FENCER_JOIN": "a:1,b:2"}, "--config", file)
	require.NoError(t, err)
	assert.Equal(t, []string{"a:1", "b:2"}, c.join)
}

// Every flag but --config, --help and --version has a variable and a key.
func TestEveryFlagFromEnvironmentAndFile(t *testing.T) {
	flags := newCommand().Flags()
	var yaml strings.Builder
	env := map[string]string{}
	n := 0
	flags.VisitAll(func(f *pflag.Flag) {
		if f.Name == "config" || f.Name == "help" || f.Name == "version" {
			return
		}
		n++
		// fencer's own variables, which a shell that runs both may hold,
		// set no fencerd flag.
		assert.NotContains(t, []string{"FENCER_ADDR", "FENCER_USER", "FENCER_PASSWORD", "FENCER_TOKEN", "FENCER_LOCK",
			"FENCER_OWNER", "FENCER_EPOCH", "FENCER_ELECTION", "FENCER_SLOT", "FENCER_FAULTS"}, envName(f.Name))
		v := strings.Trim(f.Value.String(), "[]")
		env[envName(f.Name)] = v
		yaml.WriteString(f.Name + ": '" + v + "'\n")
	})
	require.Greater(t, n, 40)
	for source, args := range map[string][]string{
		"environment": nil,
		"file":        {"--config", writeFile(t, "all.yaml", yaml.String())},
	} {
		c := defaultConfig()
		cmd := &cobra.Command{}
		c.bindFlags(cmd)
		require.NoError(t, cmd.ParseFlags(args))
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok && source == "environment" }
		require.NoError(t, applySources(cmd.Flags(), lookup), source)
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "config" {
				assert.True(t, f.Changed, "%s: --%s not set", source, f.Name)
			}
		})
	}
	assert.Equal(t, "FENCER_RAFT_TRAILING_LOGS", envName("raft-trailing-logs"))
}

// A key the file does not know, or a value its flag refuses, is an error
// naming it and its line; so is a bad value in the environment.
func TestSettingsErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       []string
	}{
		{"misspelt key", "listen: 127.0.0.1:9000\nlistn: 127.0.0.1:9001\n", nil,
			[]string{`line 2: unknown key "listn" (did you mean "listen"?)`}},
		{"command-line only", "config: other.yaml\n", nil, []string{`line 1: unknown key "config"`}},
		{"bad value", "max-ttl: soon\n", nil, []string{`line 1: max-ttl: invalid argument "soon"`}},
		{"list for one value", "listen: [a, b]\n", nil, []string{`line 1: listen: takes one value, not a list`}},
		{"not a mapping", "- listen\n", nil, []string{`line 1: want a mapping`}},
		{"bad YAML", "listen: [\n", nil, []string{"config file"}},
		{"bad environment", "", map[string]string{"FENCER_MAX_TTL": "soon"}, []string{`FENCER_MAX_TTL="soon": invalid argument "soon"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := configure(t, tc.env, "--config", writeFile(t, "f.yaml", tc.file))
			require.Error(t, err)
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
	_, err := configure(t, nil, "--config", filepath.Join(t.TempDir(), "none.yaml"))
	assert.ErrorContains(t, err, "--config: open")
	c, err := configure(t, nil, "--config", writeFile(t, "empty.yaml", "# nothing yet\n"))
	require.NoError(t, err)
	assert.Equal(t, defaultConfig().listen, c.listen)
}

// --requirepass-file sets the password from a file, without its line end;
// with --requirepass too, or empty, it is refused.
func TestRequirepassFile(t *testing.T) {
	pass := writeFile(t, "pass", "s3cret\n")
	c, err := configure(t, nil, "--requirepass-file", pass)
	require.NoError(t, err)
	_, err = c.derive(discardLogger())
	require.NoError(t, err)
	assert.Equal(t, "s3cret", c.bridge.RequirePass)

	c, _ = configure(t, map[string]string{"FENCER_REQUIREPASS": "other"}, "--requirepass-file", pass)
	_, err = c.derive(discardLogger())
	assert.EqualError(t, err, "--requirepass and --requirepass-file: set one")

	c, _ = configure(t, nil, "--requirepass-file", writeFile(t, "empty", "\n"))
	_, err = c.derive(discardLogger())
	assert.ErrorContains(t, err, "the file is empty")
}

// A misspelt flag gets the closest one suggested; one far from all does not.
func TestMisspeltFlagSuggestion(t *testing.T) {
	for arg, want := range map[string]string{"--listn": "--listen", "--max_ttl": "--max-ttl",
		"--requirepass-fil": "--requirepass-file", "--raft-advert": "--raft-advertise", "--zzzzzz": ""} {
		cmd := newCommand()
		cmd.SetArgs([]string{arg, "x"})
		cmd.SetOut(&strings.Builder{})
		cmd.SetErr(&strings.Builder{})
		err := cmd.Execute()
		require.Error(t, err, arg)
		if want == "" {
			assert.NotContains(t, err.Error(), "Did you mean", arg)
			continue
		}
		assert.Contains(t, err.Error(), "unknown flag: "+arg+"\n\nDid you mean this?\n\t"+want, arg)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// The example settings in docs (installed by make install, shipped in the
// release archives) are all keys fencerd knows, with values it takes.
func TestExampleConfigFile(t *testing.T) {
	c, err := configure(t, nil, "--config", filepath.Join("..", "..", "docs", "fencerd.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.6:7379", c.listen)
	assert.Equal(t, []string{"10.0.0.5:7379", "10.0.0.7:7379"}, c.join)
	assert.True(t, c.tls.raft)
	assert.Equal(t, "/var/lib/fencer", c.node.DataDir)
}
