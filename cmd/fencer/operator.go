package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/spf13/cobra"
)

// Commands for operators: the members' health, the leader, moving
// leadership, revoking a lock.

// exitUnhealthy is fencer members' status when a member is unhealthy.
const exitUnhealthy = 2

// outputFlag adds --output to a listing command.
func outputFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVarP(dst, "output", "o", "table", "output format: table or json")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput refuses an --output other than table or json.
func checkOutput(format string) error {
	if format != "table" && format != "json" {
		return usage("--output must be table or json, got %q", format)
	}
	return nil
}

// writeJSON prints v as indented JSON.
func (a *app) writeJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine prints v as one line of JSON (a stream of events).
func (a *app) writeJSONLine(v any) error {
	return json.NewEncoder(a.stdout).Encode(v)
}

// memberJSON is one member in fencer members --output json.
type memberJSON struct {
	ID           string `json:"id"`
	Role         string `json:"role"`
	RaftAddr     string `json:"raft_addr"`
	ClientAddr   string `json:"client_addr"`
	Version      string `json:"version"`
	Healthy      bool   `json:"healthy"`
	Problem      string `json:"problem,omitempty"`
	Reachable    bool   `json:"reachable"`
	LastAnswerMS int64  `json:"last_answer_ms"`
	LastContact  int64  `json:"last_contact_ms"`
	Applied      uint64 `json:"applied_index"`
	Commit       uint64 `json:"commit_index"`
	Lag          uint64 `json:"lag"`
	// FormatReadable: the highest format level its build reads.
	FormatReadable uint64 `json:"format_readable"`
}

func (a *app) membersCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the cluster's members and their health",
		Long: `members lists every member as the leader sees it: its role, whether it is
healthy, how long ago it last answered the leader (which asks every member
once a second), how far its lock table is behind the leader's commit index
(LAG, in log entries), the version it runs, and its addresses.

A member is unhealthy when it has not answered for longer than the
cluster's fencerd --member-unreachable-after (default 5s), or is more than
--member-lag-limit entries behind. It needs an admin user.

Exit status: 0 if every member is healthy, 2 if one is not, 1 if the
cluster's leader cannot be reached.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			return a.withClient(cmd, a.requestBound(), func(ctx context.Context, c *client.Client) error {
				h, err := c.Health(ctx)
				if err != nil {
					return err
				}
				if err := a.printHealth(h, output); err != nil {
					return err
				}
				if bad := h.Unhealthy(); len(bad) > 0 {
					for _, m := range bad {
						fmt.Fprintf(a.stderr, "fencer: member %s is unhealthy: %s\n", m.ID, m.Problem)
					}
					a.code = exitUnhealthy
				}
				return nil
			})
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func (a *app) printHealth(h client.ClusterHealth, output string) error {
	if output == "json" {
		ms := make([]memberJSON, len(h.Members))
		for i, m := range h.Members {
			ms[i] = memberJSON{ID: m.ID, Role: m.Role, RaftAddr: m.RaftAddr, ClientAddr: m.ClientAddr, Version: m.Version,
				Healthy: m.Healthy, Problem: m.Problem, Reachable: m.Reachable, LastAnswerMS: durationMS(m.LastAnswer),
				LastContact: durationMS(m.LastContact), Applied: m.Applied, Commit: m.Commit, Lag: m.Lag, FormatReadable: m.FormatReadable}
		}
		return a.writeJSON(struct {
			Leader             string       `json:"leader"`
			CommitIndex        uint64       `json:"commit_index"`
			UnreachableAfterMS int64        `json:"unreachable_after_ms"`
			LagLimit           uint64       `json:"lag_limit"`
			Members            []memberJSON `json:"members"`
		}{h.Leader, h.CommitIndex, h.UnreachableAfter.Milliseconds(), h.LagLimit, ms})
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tROLE\tHEALTH\tLAST ANSWER\tLAG\tAPPLIED\tVERSION\tRAFT ADDRESS\tCLIENT ADDRESS\tPROBLEM")
	for _, m := range h.Members {
		health, last, lag, applied := "healthy", "-", "-", "-"
		if !m.Healthy {
			health = "UNHEALTHY"
		}
		if m.LastAnswer >= 0 {
			last = ago(m.LastAnswer)
			lag, applied = fmt.Sprint(m.Lag), fmt.Sprint(m.Applied)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Role, health, last, lag, applied,
			orDash(m.Version), m.RaftAddr, orDash(m.ClientAddr), orDash(m.Problem))
	}
	return w.Flush()
}

// ago renders a time since, for a person: "0s", "1.2s", "3m4s".
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "<1s"
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// durationMS is d in milliseconds, -1 for a negative d (unknown).
func durationMS(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

func (a *app) leaderCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "leader",
		Short: "Show the cluster's leader",
		Long: `leader prints the leader's node ID and client address, as the first node
that answers knows them. It fails (exit status 1) if that node knows no
leader.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			return a.withClient(cmd, a.requestBound(), func(ctx context.Context, c *client.Client) error {
				id, addr, err := c.Leader(ctx)
				if err != nil {
					return err
				}
				if id == "" {
					return fmt.Errorf("no leader known: the cluster may be electing one, or has lost its majority")
				}
				if output == "json" {
					return a.writeJSON(map[string]string{"id": id, "client_addr": addr})
				}
				fmt.Fprintf(a.stdout, "%s %s\n", id, orDash(addr))
				return nil
			})
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func (a *app) transferCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "transfer [ID]",
		Short: "Move leadership to another member",
		Long: `transfer hands leadership over to the member ID, or, without ID, to the most
up-to-date follower, and returns once it moved. Move it off a node before
stopping or removing that node. It needs an admin user.`,
		Args: cobra.MaximumNArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return a.completeMembers(cmd), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			return a.withClient(cmd, a.adminBound(), func(ctx context.Context, c *client.Client) error {
				before, _, _ := c.Leader(ctx)
				if err := c.TransferLeadership(ctx, id); err != nil {
					return err
				}
				// The node asked learns the new leader from its first
				// heartbeat: ask for a moment before saying less.
				for end := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					after, addr, err := c.Leader(ctx)
					if err == nil && after != "" && after != before {
						fmt.Fprintf(a.stdout, "leadership moved from %s to %s (%s)\n", orDash(before), after, orDash(addr))
						return nil
					}
					if time.Now().After(end) {
						fmt.Fprintf(a.stdout, "leadership moved off %s\n", orDash(before))
						return nil
					}
				}
			})
		},
	}
}

func (a *app) revokeCommand() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "End a lock's grant, whoever holds it",
		Long: `revoke ends the current grant of the lock NAME and hands the lock to the
first in line. The holder is not told: its fencing token is simply no longer
the current one, so storage that checks tokens refuses its writes. It asks
for confirmation on a terminal; without one it refuses unless --yes is
given. It needs an admin user.`,
		Args: args(1, "the lock's NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !yes && !isTerminal(a.stdin) {
				return usage("revoke asks for confirmation and there is no terminal to ask on: pass --yes to revoke %q", name)
			}
			return a.withClient(cmd, a.requestBound(), func(ctx context.Context, c *client.Client) error {
				s, held, err := c.Status(ctx, name)
				if err != nil {
					return err
				}
				if !held {
					fmt.Fprintf(a.stdout, "%q is free: nothing to revoke\n", name)
					return nil
				}
				if !yes {
					fmt.Fprintf(a.stderr, "Revoke %q, held by %s with token %d (%v left)? [y/N] ", name, shellQuote(s.Owner), s.Token, s.Remaining.Round(time.Millisecond))
					answer, _ := bufio.NewReader(a.stdin).ReadString('\n')
					if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
						return fmt.Errorf("not revoked")
					}
				}
				ok, err := c.Revoke(ctx, name)
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintf(a.stdout, "%q was already free: nothing revoked\n", name)
					return nil
				}
				fmt.Fprintf(a.stdout, "revoked %q (held by %s with token %d when asked)\n", name, shellQuote(s.Owner), s.Token)
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "revoke without asking")
	return cmd
}

// completeMembers returns the members' IDs for shell completion, or none
// if the cluster does not answer within completionWait.
func (a *app) completeMembers(cmd *cobra.Command) []cobra.Completion {
	if a.resolveAddrs(cmd) != nil || a.sec.resolve(cmd, a.getenv) != nil {
		return nil
	}
	c, err := a.newClient()
	if err != nil {
		return nil
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), completionWait)
	defer cancel()
	ms, err := c.Members(ctx)
	if err != nil {
		return nil
	}
	out := make([]cobra.Completion, len(ms))
	for i, m := range ms {
		out[i] = cobra.CompletionWithDesc(m.ID, m.Role)
	}
	return out
}

// completionWait bounds asking the cluster while completing a command line:
// a shell that waits longer feels broken, so it completes nothing instead.
const completionWait = 300 * time.Millisecond
