package main

import (
	"context"
	"fmt"

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
			return a.withClient(cmd, a.requestBound(), func(ctx context.Context, c *client.Client) error {
				data, err := c.Snapshot(ctx)
				if err != nil {
					return err
				}
				if err := atomicfile.Write(args[0], data, 0o600); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "saved %d bytes to %s\n", len(data), args[0])
				return nil
			})
		},
	})
	return cmd
}
