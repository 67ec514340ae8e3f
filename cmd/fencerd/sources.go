package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// fencerd takes every flag from three sources besides its default, in this
// order of precedence: the command line, the environment (envPrefix and
// the flag's name: --max-ttl is FENCER_MAX_TTL), and a YAML file whose keys
// are the flags' names (--config, or FENCER_CONFIG), as etcd's
// --config-file. Each flag is set from the first source that has it, so a
// value is never a mix of two.

// envPrefix starts the environment variable of every flag.
const envPrefix = "FENCER_"

// commandLineOnly are the flags neither the environment nor the file sets:
// --config names the file (FENCER_CONFIG does too); --help and --version
// are questions, not settings.
var commandLineOnly = []string{"config", "help", "version"}

// envName is the environment variable that sets the flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applySources sets each flag of fs that the command line did not from
// the environment (lookupEnv), else from the config file that --config or
// else FENCER_CONFIG names (none if neither does). An unknown key in the file, or a value its flag refuses,
// is an error naming it. Variables that name no flag are ignored, as the
// environment holds other programs' FENCER_* too (fencer's FENCER_ADDR).
func applySources(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) error {
	path := fs.Lookup("config").Value.String()
	if !fs.Changed("config") {
		path, _ = lookupEnv(envName("config"))
	}
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || slices.Contains(commandLineOnly, f.Name) {
			return
		}
		if v, ok := lookupEnv(envName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", envName(f.Name), v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil || path == "" {
		return err
	}
	return applyFile(fs, path)
}

// applyFile sets the flags that neither the command line nor the
// environment set from the YAML file at path: a mapping of flag names to
// scalars (a sequence for a list such as join).
func applyFile(fs *pflag.FlagSet, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file sets nothing
		}
		return fmt.Errorf("config file %s: %w", path, err)
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return nil
	}
	if top.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s: line %d: want a mapping of flag names to values", path, top.Line)
	}
	var errs []error
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, val := top.Content[i], top.Content[i+1]
		if err := applyKey(fs, key, val); err != nil {
			errs = append(errs, fmt.Errorf("config file %s: line %d: %w", path, key.Line, err))
		}
	}
	return errors.Join(errs...)
}

// applyKey sets the flag that key names to val, unless a source with
// precedence set it already.
func applyKey(fs *pflag.FlagSet, key, val *yaml.Node) error {
	f := fs.Lookup(key.Value)
	if f == nil || slices.Contains(commandLineOnly, key.Value) {
		msg := fmt.Sprintf("unknown key %q", key.Value)
		if s := suggestFlag(fs, key.Value); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return errors.New(msg)
	}
	if f.Changed {
		return nil
	}
	switch val.Kind {
	case yaml.ScalarNode:
		if val.Tag == "!!null" {
			return fmt.Errorf("%s: no value", key.Value)
		}
		if err := fs.Set(f.Name, val.Value); err != nil {
			return fmt.Errorf("%s: %w", key.Value, err)
		}
	case yaml.SequenceNode:
		sv, ok := f.Value.(pflag.SliceValue)
		if !ok {
			return fmt.Errorf("%s: takes one value, not a list", key.Value)
		}
		items := make([]string, 0, len(val.Content))
		for _, n := range val.Content {
			if n.Kind != yaml.ScalarNode {
				return fmt.Errorf("%s: a list of plain values only", key.Value)
			}
			items = append(items, n.Value)
		}
		if err := sv.Replace(items); err != nil {
			return fmt.Errorf("%s: %w", key.Value, err)
		}
		f.Changed = true
	default:
		return fmt.Errorf("%s: want a value or a list, not a mapping", key.Value)
	}
	return nil
}

// suggestFlag returns the name of fs's flag closest to name, as cobra
// suggests a subcommand: within suggestDistance edits or starting with
// name; "" if none is that close.
func suggestFlag(fs *pflag.FlagSet, name string) string {
	best, bestD := "", suggestDistance+1
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == name {
			return
		}
		d := editDistance(strings.ToLower(name), f.Name)
		if d > suggestDistance && strings.HasPrefix(f.Name, strings.ToLower(name)) {
			d = suggestDistance
		}
		if d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

// suggestDistance is cobra's default SuggestionsMinimumDistance, which
// fencer's subcommands are suggested by.
const suggestDistance = 2

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// suggestOnUnknownFlag is fencerd's flag error function: to an unknown
// flag it adds the closest known one, as cobra does for a misspelt
// subcommand.
func suggestOnUnknownFlag(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	if s := suggestFlag(cmd.Flags(), name); s != "" {
		return fmt.Errorf("%w\n\nDid you mean this?\n\t--%s", err, s)
	}
	return err
}

// readSecret returns the secret in the file at path: its contents without
// the line end an editor adds. An empty secret is an error.
func readSecret(path, flag string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s %s: the file is empty", flag, path)
	}
	return s, nil
}
