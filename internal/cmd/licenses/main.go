// Command licenses writes the licence texts of the Go modules compiled
// into the packages it is given, for every release target (the TARGETS of
// scripts/release.sh, run from the module root), to -out, after
// checking that each module's licence is on the allowed list
// (internal/licenses); make release puts them in every archive. It exits
// non-zero, naming the modules, if one is missing or not allowed.
//
//	go run ./internal/cmd/licenses -out dist/THIRD_PARTY_LICENSES ./cmd/fencerd ./cmd/fencer
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/fencerlock/fencer/internal/licenses"
	"github.com/fencerlock/fencer/internal/release"
)

func main() {
	out := flag.String("out", "", "directory to write the licence texts to (created; must not exist)")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: licenses -out DIR PACKAGE...")
		os.Exit(2)
	}
	if err := run(context.Background(), *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "licenses:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, pkgs []string) error {
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s exists: remove it first", out)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	targets, err := release.Targets(root)
	if err != nil {
		return err
	}
	mods, err := licenses.Modules(ctx, root, targets, pkgs...)
	if err != nil {
		return err
	}
	if err := licenses.Classify(mods); err != nil {
		return err
	}
	if err := licenses.Check(mods, licenses.Allowed); err != nil {
		return err
	}
	return licenses.Write(out, mods)
}
