package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/internal/atomicfile"
	"github.com/spf13/cobra"
)

func (a *app) snapshotCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back up the cluster's lock table",
		Args:  args(0, "a subcommand"),
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "save FILE",
		Short: "Save the lock table to FILE",
		Long: `save writes the cluster's lock table, as the leader holds it, to FILE
(written to a temporary file beside it, synced, then renamed). Start a new
cluster from it with: fencerd --restore FILE --data-dir EMPTY-DIR ...`,
		Args: args(1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			// Checked first, so that a typo costs the leader no snapshot.
			if dir := filepath.Dir(path); dir != "" {
				if st, err := os.Stat(dir); err != nil {
					return fmt.Errorf("cannot save to %s: its directory %s: %w", path, dir, pathErr(err))
				} else if !st.IsDir() {
					return fmt.Errorf("cannot save to %s: %s is not a directory", path, dir)
				}
			}
			if st, err := os.Stat(path); err == nil && st.IsDir() {
				return fmt.Errorf("cannot save to %s: it is a directory; name a file in it", path)
			}
			return a.withClient(cmd, a.requestBound(), func(ctx context.Context, c *client.Client) error {
				data, err := c.Snapshot(ctx)
				if err != nil {
					return err
				}
				if err := atomicfile.Write(path, data, 0o600); err != nil {
					return fmt.Errorf("cannot save to %s: %w", path, pathErr(err))
				}
				fmt.Fprintf(a.stdout, "saved %d bytes to %s\n", len(data), args[0])
				return nil
			})
		},
	})
	return cmd
}

// pathErr is err without the path an *fs.PathError names (a temporary
// file's, or one the message names already).
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
