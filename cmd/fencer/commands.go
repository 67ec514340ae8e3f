package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/spf13/cobra"
)

func (a *app) acquireCommand() *cobra.Command {
	var ttl, wait time.Duration
	var owner string
	cmd := &cobra.Command{
		Use:   "acquire NAME",
		Short: "Take a lock and print its token and owner",
		Long: `acquire takes the lock NAME for --ttl and prints, as shell assignments:

  FENCER_LOCK=NAME
  FENCER_TOKEN=the fencing token
  FENCER_OWNER=the owner to extend or release it with

so that a script can run: eval "$(fencer acquire NAME)". The lock is not
renewed: extend it with 'fencer extend', release it with 'fencer release', or
let it expire. If another owner holds it, acquire fails (exit status 1) unless
--wait lets it wait in line.`,
		Args: args(1, "the lock's NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			opts := []client.LeaseOption{client.WithTTL(ttl)}
			if owner != "" {
				opts = append(opts, client.WithOwner(owner))
			}
			var l *client.Lease
			if wait > 0 {
				ctx, cancel := signalContext(cmd.Context())
				defer cancel()
				ctx, cancelWait := contextTimeout(ctx, wait)
				defer cancelWait()
				l, err = c.Acquire(ctx, args[0], opts...)
			} else {
				ctx, cancel := a.requestContext(cmd)
				defer cancel()
				l, err = c.TryAcquire(ctx, args[0], opts...)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "FENCER_LOCK=%s\nFENCER_TOKEN=%d\nFENCER_OWNER=%s\n",
				shellQuote(l.Name()), l.Token(), shellQuote(l.Owner()))
			return nil
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 30*time.Second, "time to live of the lease")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait in line this long if the lock is held (0: do not wait)")
	cmd.Flags().StringVar(&owner, "owner", "", "owner value, unique to this lease (default: random)")
	return cmd
}

func (a *app) extendCommand() *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "extend NAME OWNER",
		Short: "Renew a lease for its TTL from now",
		Long: `extend renews OWNER's lease on the lock NAME for --ttl from now. It fails
(exit status 1) if OWNER no longer holds the lock.`,
		Args: args(2, "the lock's NAME and the OWNER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, a.requestBound(), func(ctx context.Context, c *client.Client) error {
				ok, err := c.NewMutex(args[0], client.WithValue(args[1]), client.WithExpiry(ttl)).ExtendContext(ctx)
				if !ok && errors.Is(err, client.ErrLeaseLost) {
					return fmt.Errorf("%q does not hold %q", args[1], args[0])
				}
				if err == nil {
					fmt.Fprintf(a.stdout, "extended %s for %v\n", shellQuote(args[0]), ttl)
				}
				return err
			})
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 30*time.Second, "new time to live of the lease")
	return cmd
}

func (a *app) releaseCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "release NAME OWNER",
		Short: "Release a lock",
		Long: `release frees the lock NAME held by OWNER, handing it to the first in line.
Releasing again succeeds. It fails (exit status 1) if OWNER neither holds the
lock nor released it last.`,
		Args: args(2, "the lock's NAME and the OWNER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, a.requestBound(), func(ctx context.Context, c *client.Client) error {
				ok, err := c.NewMutex(args[0], client.WithValue(args[1])).UnlockContext(ctx)
				if !ok && errors.Is(err, client.ErrLeaseLost) {
					return fmt.Errorf("%q does not hold %q", args[1], args[0])
				}
				if err == nil {
					fmt.Fprintf(a.stdout, "released %s\n", shellQuote(args[0]))
				}
				return err
			})
		},
	}
}

func (a *app) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Show who holds a lock",
		Long: `status prints "free", or the holder of the lock NAME as
"owner=OWNER token=TOKEN remaining=DURATION" (the time left on the leader's
clock).`,
		Args: args(1, "the lock's NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, a.requestBound(), func(ctx context.Context, c *client.Client) error {
				s, held, err := c.Status(ctx, args[0])
				switch {
				case err != nil:
					return err
				case !held:
					fmt.Fprintln(a.stdout, "free")
				default:
					fmt.Fprintf(a.stdout, "owner=%s token=%d remaining=%v\n", shellQuote(s.Owner), s.Token, s.Remaining)
				}
				return nil
			})
		},
	}
}

func (a *app) joinCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "join ID RAFT-ADDR CLIENT-ADDR",
		Short: "Add a node to the cluster",
		Long: `join adds the node ID, reached by the other nodes at RAFT-ADDR and by clients
at CLIENT-ADDR, to the cluster as a voter. fencerd --join does this itself.`,
		Args: args(3, "ID, RAFT-ADDR and CLIENT-ADDR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, a.adminBound(), func(ctx context.Context, c *client.Client) error {
				if err := c.Join(ctx, args[0], args[1], args[2]); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s is a voting member (raft %s, clients %s)\n", args[0], args[1], args[2])
				return nil
			})
		},
	}
}

func (a *app) removeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a node from the cluster",
		Args:  args(1, "the node's ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, a.adminBound(), func(ctx context.Context, c *client.Client) error {
				if err := c.Remove(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "removed %s from the cluster\n", args[0])
				return nil
			})
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shellQuote quotes s for a POSIX shell, unless it needs no quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
