package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/spf13/cobra"
)

// Listings: locks, sessions, elections, and a live watch.

// listFlags are the paging flags of a listing.
type listFlags struct {
	output string
	count  int // page size
	limit  int // at most this many rows in all; 0: every one
}

func (f *listFlags) add(cmd *cobra.Command, what string) {
	outputFlag(cmd, &f.output)
	cmd.Flags().IntVar(&f.count, "page-size", 100, "rows asked for at a time (1 to 1000)")
	cmd.Flags().IntVar(&f.limit, "limit", 1000, "list at most this many "+what+" (0: all)")
}

func (f *listFlags) check() error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	if f.count < 1 || f.count > 1000 {
		return usage("--page-size must be 1 to 1000, got %d", f.count)
	}
	if f.limit < 0 {
		return usage("--limit must not be negative, got %d", f.limit)
	}
	return nil
}

// room is how many more rows fit under the limit, given n listed.
func (f *listFlags) room(n int) int {
	if f.limit == 0 {
		return f.count
	}
	return min(f.count, f.limit-n)
}

// lockJSON is one lock in --output json.
type lockJSON struct {
	Name    string       `json:"name"`
	Kind    string       `json:"kind"`
	Permits uint64       `json:"permits,omitempty"`
	Value   string       `json:"value,omitempty"`
	Holders []holderJSON `json:"holders"`
	Waiters []waiterJSON `json:"waiters"`
}

type holderJSON struct {
	Owner       string `json:"owner"`
	Token       uint64 `json:"token"`
	RemainingMS int64  `json:"remaining_ms"`
	Session     uint64 `json:"session,omitempty"`
	Mode        string `json:"mode,omitempty"`
	// Client is the client that took it, the leader's record; null if
	// the leader has none (granted under an earlier leader).
	Client *client.ClientInfo `json:"client"`
}

type waiterJSON struct {
	Owner    string `json:"owner"`
	Mode     string `json:"mode,omitempty"`
	Permits  uint64 `json:"permits,omitempty"`
	Session  uint64 `json:"session,omitempty"`
	Keys     int    `json:"keys"`
	WaitedMS int64  `json:"waited_ms"`
}

// lockListing is what fencer locks and elections gathered.
type lockListing struct {
	Leader    string     `json:"leader"`
	Positions []uint64   `json:"positions"`
	Complete  bool       `json:"complete"`
	Locks     []lockJSON `json:"locks"`
}

// listLocks reads pages of q until the last one or the limit.
func (a *app) listLocks(ctx context.Context, c *client.Client, q client.LockQuery, f *listFlags) (lockListing, error) {
	var out lockListing
	for {
		q.Count = f.room(len(out.Locks))
		if q.Count <= 0 {
			return out, nil
		}
		p, err := c.Locks(ctx, q)
		if err != nil {
			return out, err
		}
		out.Leader = p.Leader
		out.Positions = append(out.Positions, p.Position)
		for _, l := range p.Locks {
			lj := lockJSON{Name: l.Name, Kind: l.Kind, Permits: l.Permits, Value: l.Value, Holders: []holderJSON{}, Waiters: []waiterJSON{}}
			for _, h := range l.Holders {
				lj.Holders = append(lj.Holders, holderJSON{Owner: h.Owner, Token: h.Token, RemainingMS: durationMS(h.Remaining), Session: h.Session, Mode: h.Mode, Client: h.Client})
			}
			for _, w := range l.Waiters {
				lj.Waiters = append(lj.Waiters, waiterJSON{Owner: w.Owner, Mode: w.Mode, Permits: w.Permits, Session: w.Session, Keys: w.Keys, WaitedMS: w.Waited.Milliseconds()})
			}
			out.Locks = append(out.Locks, lj)
		}
		if p.Next == "" {
			out.Complete = true
			return out, nil
		}
		q.After = p.Next
	}
}

// runLockListing reads the pages of q (its prefix from args) and prints
// them as JSON or with print.
func (a *app) runLockListing(cmd *cobra.Command, args []string, q client.LockQuery, f *listFlags, print func(lockListing)) error {
	if err := f.check(); err != nil {
		return err
	}
	if len(args) == 1 {
		q.Prefix = args[0]
	}
	return a.withClient(cmd, a.requestBound(), func(ctx context.Context, c *client.Client) error {
		l, err := a.listLocks(ctx, c, q, f)
		if err != nil {
			return err
		}
		if f.output == "json" {
			return a.writeJSON(l)
		}
		print(l)
		return nil
	})
}

// pagesNote says how a listing was read, for a person.
func pagesNote(w io.Writer, positions []uint64, complete bool, leader string, what string) {
	switch {
	case len(positions) == 1:
		fmt.Fprintf(w, "(read at log position %d", positions[0])
	case len(positions) > 1:
		fmt.Fprintf(w, "(read in %d pages at log positions %d to %d: not one snapshot", len(positions), positions[0], positions[len(positions)-1])
	}
	if leader != "" {
		fmt.Fprintf(w, "; clients and waiters are leader %s's current record", leader)
	}
	if !complete {
		fmt.Fprintf(w, "; more %s follow: raise --limit", what)
	}
	fmt.Fprintln(w, ")")
}

func (a *app) locksCommand() *cobra.Command {
	var f listFlags
	var match string
	cmd := &cobra.Command{
		Use:   "locks [PREFIX]",
		Short: "List locks with their holders, tokens and waiters",
		Long: `locks lists the locks whose names start with PREFIX (all without one), in
name order: each one's kind (lock, read-write, semaphore, or a Redis value),
its holders with owner, fencing token, time left on the leader's clock and
session, and the acquires waiting for it in the order they will be served,
with how long each has waited (the leader's queue at that moment).

Each page is read at one position of the log; a listing of several pages is
not one snapshot. A user limited to a lock-name pattern sees only its names.`,
		Args: cobra.MaximumNArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return a.completeLocks(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runLockListing(cmd, args, client.LockQuery{Match: match}, &f, a.printLocks)
		},
	}
	f.add(cmd, "locks")
	cmd.Flags().StringVar(&match, "match", "", "list only names matching this glob pattern (as KEYS takes)")
	return cmd
}

func (a *app) printLocks(l lockListing) {
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tKIND\tOWNER\tTOKEN\tREMAINING\tSESSION\tCLIENT (USER ADDR NAME)\tWAITERS (IN ORDER)")
	for _, lk := range l.Locks {
		waiters := "-"
		if len(lk.Waiters) > 0 {
			var ws []string
			for i, wt := range lk.Waiters {
				ws = append(ws, fmt.Sprintf("%d. %s (%s)", i+1, wt.Owner, ago(time.Duration(wt.WaitedMS)*time.Millisecond)))
			}
			waiters = strings.Join(ws, ", ")
		}
		kind := lk.Kind
		if lk.Permits > 0 {
			kind = fmt.Sprintf("semaphore/%d", lk.Permits)
		}
		if len(lk.Holders) == 0 {
			fmt.Fprintf(w, "%s\t%s\t-\t-\t-\t-\t-\t%s\n", lk.Name, kind, waiters)
		}
		for i, h := range lk.Holders {
			name, k := lk.Name, kind
			if i > 0 {
				name, k, waiters = "", "", ""
			}
			owner := h.Owner
			if h.Mode != "" {
				owner += " (" + h.Mode + ")"
			}
			session := "-"
			if h.Session != 0 {
				session = fmt.Sprint(h.Session)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", name, k, owner, h.Token, remaining(h.RemainingMS), session, clientColumn(h.Client), waiters)
		}
	}
	_ = w.Flush()
	pagesNote(a.stdout, l.Positions, l.Complete, l.Leader, "locks")
}

// clientColumn renders the client that took a lock: its user, address
// and name (- without one), or unknown where the leader has no record.
func clientColumn(c *client.ClientInfo) string {
	if c == nil {
		return "unknown (not recorded by this leader)"
	}
	name := "-"
	if c.Name != "" {
		name = shellQuote(c.Name)
	}
	return fmt.Sprintf("%s %s %s", c.User, c.Addr, name)
}

// remaining renders a time left in milliseconds; -1 is none.
func remaining(ms int64) string {
	if ms < 0 {
		return "no TTL"
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Millisecond).String()
}

func (a *app) electionsCommand() *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:   "elections [PREFIX]",
		Short: "List elections with their leaders, epochs and candidates",
		Long: `elections lists the elections whose names start with PREFIX: locks held under
a session (as every election's is), each with its leader (the holder), its
epoch (the fencing token), the value the leader announced, and the
candidates waiting in line (the leader's queue). A lock taken under a
session outside an election is listed too.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runLockListing(cmd, args, client.LockQuery{Elections: true}, &f, func(l lockListing) {
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ELECTION\tLEADER\tEPOCH\tSESSION\tVALUE\tCANDIDATES (IN ORDER)")
				for _, lk := range l.Locks {
					if len(lk.Holders) == 0 {
						continue
					}
					h := lk.Holders[0]
					cands := []string{}
					for _, c := range lk.Waiters {
						cands = append(cands, c.Owner)
					}
					fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\n", lk.Name, h.Owner, h.Token, h.Session, orDash(lk.Value), orDash(strings.Join(cands, ", ")))
				}
				_ = w.Flush()
				pagesNote(a.stdout, l.Positions, l.Complete, l.Leader, "elections")
			})
		},
	}
	f.add(cmd, "elections")
	return cmd
}

// sessionJSON is one session in --output json.
type sessionJSON struct {
	ID          uint64   `json:"id"`
	User        string   `json:"user"`
	TTLMS       int64    `json:"ttl_ms"`
	RemainingMS int64    `json:"remaining_ms"`
	Locks       int      `json:"locks"`
	Names       []string `json:"names"`
	Taken       uint64   `json:"taken"`
}

func (a *app) sessionsCommand() *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List open sessions with their user, TTL and locks",
		Long: `sessions lists the open sessions by ID: the user that opened each, its TTL and
time left on the leader's clock, how many locks it holds (and the first 16
names), and how many were taken from it by others. A user limited to a
lock-name pattern sees only its own sessions.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return a.withClient(cmd, a.requestBound(), func(ctx context.Context, c *client.Client) error {
				var out struct {
					Positions []uint64      `json:"positions"`
					Complete  bool          `json:"complete"`
					Sessions  []sessionJSON `json:"sessions"`
				}
				after := uint64(0)
				for {
					n := f.room(len(out.Sessions))
					if n <= 0 {
						break
					}
					p, err := c.Sessions(ctx, after, n)
					if err != nil {
						return err
					}
					out.Positions = append(out.Positions, p.Position)
					for _, s := range p.Sessions {
						out.Sessions = append(out.Sessions, sessionJSON{ID: s.ID, User: s.User, TTLMS: s.TTL.Milliseconds(),
							RemainingMS: s.Remaining.Milliseconds(), Locks: s.Locks, Names: append([]string{}, s.Names...), Taken: s.Taken})
					}
					if p.Next == 0 {
						out.Complete = true
						break
					}
					after = p.Next
				}
				if f.output == "json" {
					return a.writeJSON(out)
				}
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tUSER\tTTL\tREMAINING\tLOCKS\tTAKEN\tNAMES")
				for _, s := range out.Sessions {
					names := strings.Join(s.Names, ", ")
					if s.Locks > len(s.Names) {
						names += fmt.Sprintf(", … (%d in all)", s.Locks)
					}
					fmt.Fprintf(w, "%d\t%s\t%v\t%v\t%d\t%d\t%s\n", s.ID, orDash(s.User), time.Duration(s.TTLMS)*time.Millisecond,
						time.Duration(s.RemainingMS)*time.Millisecond, s.Locks, s.Taken, orDash(names))
				}
				_ = w.Flush()
				pagesNote(a.stdout, out.Positions, out.Complete, "", "sessions")
				return nil
			})
		},
	}
	f.add(cmd, "sessions")
	return cmd
}

func (a *app) watchCommand() *cobra.Command {
	var output, prefix string
	cmd := &cobra.Command{
		Use:   "watch [NAME | --prefix PREFIX]",
		Short: "Print every change of a lock's holder, or of every lock under a prefix, as it happens",
		Long: `watch prints the lock NAME's holder as of now, then every grant, release,
expiry, revoke and announcement as it happens, one line each with its log
position, until interrupted. It follows the cluster across leader changes
and node failures, resuming from the last position it printed: nothing is
skipped, and if the node no longer has what was missed it prints a reset
with the holder as of then.

Without NAME, or with --prefix, it prints the changes of every lock whose
name starts with PREFIX (every lock, without one), each line naming its
lock, in log order, with the same resumption. Its first line, and any line
where changes were missed, is a reset naming no lock: 'fencer locks PREFIX'
shows the holders as of then. A user limited to a lock-name pattern sees
only its names.`,
		Args: cobra.MaximumNArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return a.completeLocks(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			byPrefix := len(args) == 0
			if !byPrefix && cmd.Flags().Changed("prefix") {
				return usage("give the lock's NAME or --prefix, not both")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			var w *client.Watch
			if byPrefix {
				w, err = c.WatchPrefix(ctx, prefix)
			} else {
				w, err = c.Watch(ctx, args[0])
			}
			if err != nil {
				return err
			}
			defer w.Close()
			for {
				select {
				case ev := <-w.Events():
					a.printEvent(ev, output, byPrefix)
				case <-w.Done():
					if err := w.Err(); err != nil && ctx.Err() == nil {
						return err
					}
					return nil
				}
			}
		},
	}
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&prefix, "prefix", "", "without NAME: watch every lock whose name starts with this (all without it)")
	_ = cmd.RegisterFlagCompletionFunc("prefix", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return a.completeLocks(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
	return cmd
}

// printEvent prints one event of a watch of a lock or, byPrefix, of a
// prefix (its lines name the lock; its resets name none).
func (a *app) printEvent(ev client.Event, output string, byPrefix bool) {
	if output == "json" {
		_ = a.writeJSONLine(map[string]any{"kind": ev.Kind, "name": ev.Name, "position": ev.Position, "owner": ev.Owner, "token": ev.Token, "value": ev.Value})
		return
	}
	line := fmt.Sprintf("%s position=%d %s", time.Now().Format("15:04:05.000"), ev.Position, ev.Kind)
	switch {
	case byPrefix && ev.Kind == client.EventReset:
		line += " (changes up to here are not shown: fencer locks lists the holders)"
	case byPrefix:
		line += fmt.Sprintf(" name=%s owner=%s token=%d", shellQuote(ev.Name), shellQuote(ev.Owner), ev.Token)
	case ev.Kind == client.EventReset && ev.Token == 0:
		line += " free"
	default:
		line += fmt.Sprintf(" owner=%s token=%d", shellQuote(ev.Owner), ev.Token)
	}
	if ev.Value != "" {
		line += " value=" + shellQuote(ev.Value)
	}
	fmt.Fprintln(a.stdout, line)
}

// completeLocks returns lock names starting with prefix for shell
// completion, or none if the cluster does not answer within completionWait.
func (a *app) completeLocks(cmd *cobra.Command, prefix string) []cobra.Completion {
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
	p, err := c.Locks(ctx, client.LockQuery{Prefix: prefix, Count: 100})
	if err != nil {
		return nil
	}
	out := make([]cobra.Completion, len(p.Locks))
	for i, l := range p.Locks {
		out[i] = l.Name
	}
	return out
}
