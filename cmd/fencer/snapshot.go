package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fencerlock/fencer/client"
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
			return a.withClient(cmd, a.requestBound(), func(ctx context.Context, c *client.Client) error {
				data, err := c.Snapshot(ctx)
				if err != nil {
					return err
				}
				if err := writeFileSynced(args[0], data); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "saved %d bytes to %s\n", len(data), args[0])
				return nil
			})
		},
	})
	return cmd
}

// writeFileSynced writes data to path atomically: a synced temporary file
// in the same directory, renamed over path.
func writeFileSynced(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
