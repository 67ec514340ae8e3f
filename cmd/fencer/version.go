package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/internal/version"
	"github.com/spf13/cobra"
)

func (a *app) versionCommand() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print fencer's version and each node's",
		Long: `version prints this fencer's version, then the version each member of the
cluster runs, asked of each node at its client address (a node that does not
answer is shown as unreachable). It fails if no node of --addr answers;
--client prints this fencer's version alone.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(a.stdout, "fencer", version.Get())
			if clientOnly {
				return nil
			}
			return a.withClient(cmd, a.requestBound(), func(ctx context.Context, c *client.Client) error {
				ms, err := c.Members(ctx)
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tCLIENT ADDRESS\tROLE\tVERSION\tCOMMIT\tCOMMIT TIME")
				for _, m := range ms {
					ni, err := a.nodeInfo(ctx, m.ClientAddr)
					if err != nil {
						fmt.Fprintf(a.stderr, "fencer: node %s: %v\n", m.ID, err)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, orDash(m.ClientAddr), m.Role,
						ni.Version, orDash(short(ni.Commit)), orDash(ni.CommitTime))
				}
				return w.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print this fencer's version only; ask no node")
	return cmd
}

// nodeInfo asks the node at addr about itself. When it cannot, Version
// says "unreachable" (or "-" for a member with no client address yet).
func (a *app) nodeInfo(ctx context.Context, addr string) (client.NodeInfo, error) {
	if addr == "" {
		return client.NodeInfo{Version: "-"}, nil
	}
	opts := append([]client.Option{client.WithFailoverTimeout(a.requestTimeout()), client.WithRequestTimeout(a.requestTimeout())}, a.sec.options()...)
	c, err := client.New([]string{addr}, opts...)
	if err != nil {
		return client.NodeInfo{Version: "unreachable"}, err
	}
	defer c.Close()
	ni, err := c.NodeInfo(ctx)
	if err != nil {
		return client.NodeInfo{Version: "unreachable"}, err
	}
	return ni, nil
}

// short is a commit hash cut to 12 digits, as version.Info prints it.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
