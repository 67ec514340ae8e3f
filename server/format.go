package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/fencerlock/fencer/internal/atomicfile"
	"github.com/fencerlock/fencer/internal/version"
	"github.com/hashicorp/raft"
)

// Format levels on the server (fsm/format.go has the levels; docs/
// compatibility.md what they promise). The cluster's level is the table's
// (applied from the log), so every node decides alike what it may write:
// Release writes the give-up flag only at level 1 and up, and a snapshot
// is of the version its level's builds read.
//
// The leader raises the level (commits fsm.OpFormat) once every server of
// its latest Raft configuration, voter or not, has told it that it reads
// that level, in answers to the member-health probe of this leadership
// (Progress.FormatReadable; a build from before levels does not say, and
// is taken to read level 0), asked within the unreachable limit, and no
// configuration change is in flight. A server joins only if it reads the
// level in use. The raise and a join hold formatGate.mu across their check
// and their change, so that neither acts on what the other is changing;
// both run only on a ready leader, whose Barrier applied every raise an
// earlier leader may have committed, and a raise proposed by an earlier
// leader and not in this leader's log can never commit.
//
// A node that applies a raise to a level it cannot read, or is sent a
// snapshot it cannot read, stops applying (halt), reports the error on
// Stopped, and records it in its data directory (formatRefusedFile) so
// that it refuses to start there again until a build that reads the level
// runs on it.

// formatRefusedFile, in the data directory, records why the node stopped
// for a format it cannot read: "level L snapshot V" (the level or the
// snapshot version needed, 0 if not known; the entry's index, 0 for a
// snapshot) and the message.
const formatRefusedFile = "format-refused"

// formatCheckInterval is how often the leader looks whether it may raise
// the format level (the probe answers once a second).
const formatCheckInterval = time.Second

// formatAnswerFresh is how old a member's answer may be for a raise:
// three rounds of the probe, which asks once a second. formatConfirmWait
// is how long a decided raise waits for every member to answer again
// (formatConfirmPoll: how often it looks).
const (
	formatAnswerFresh = 3 * time.Second
	formatConfirmWait = 3 * time.Second
	formatConfirmPoll = 20 * time.Millisecond
)

// formatGate serializes raises of the format level with joins.
type formatGate struct {
	mu sync.Mutex // held by a raise across its check and commit, by a join across its check and configuration change
	// kick wakes formatLoop when a member answered the probe.
	kick chan struct{}
}

// FormatInUse returns the cluster's format level, as this node applied it.
func (n *Node) FormatInUse() uint64 { return n.table.Format() }

// Stopped is closed with the error of a node that stopped applying because
// the cluster's data is in a format it cannot read (ErrUnreadableFormat);
// fencerd exits with it. It stays open otherwise.
func (n *Node) Stopped() <-chan error { return n.fsm.halted }

// formatLoop raises the format level when it may, on the leader, until the
// node stops.
func (n *Node) formatLoop() {
	defer n.wg.Done()
	t := time.NewTicker(formatCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stopCh:
			return
		case <-t.C:
		case <-n.format.kick:
		}
		if term, ok := n.grants.readyTerm(); ok {
			n.raiseFormat(term)
		}
	}
}

// leadsIn reports whether this node still leads in term.
func (n *Node) leadsIn(term uint64) bool {
	return n.raft.State() == raft.Leader && n.raft.CurrentTerm() == term
}

// raiseFormat commits the highest level every server of the configuration
// reads, if it is above the level in use, and reports the level it
// committed (0: none). It runs on the leader of term, after the Barrier
// of term (so its table holds every raise committed before): from the
// leadership watcher before the node is ready (a cluster of one raises at
// once, before any request), then from formatLoop.
func (n *Node) raiseFormat(term uint64) uint64 {
	from := n.table.Format()
	if from >= fsm.FormatReadable || !n.leadsIn(term) {
		return 0
	}
	n.format.mu.Lock()
	defer n.format.mu.Unlock()
	if to, _ := n.formatAllRead(term, time.Time{}); to <= from {
		return 0
	}
	// Commit every configuration change appended so far (raft does not
	// say whether its latest configuration is committed), then look
	// again: the servers read are then those of a committed
	// configuration. A join holds the gate until its change is done, and
	// a removal in flight only takes a server away.
	if err := n.raft.Barrier(formatCheckInterval * 5).Error(); err != nil {
		return 0
	}
	decided := time.Now()
	to, why := n.formatAllRead(term, time.Time{})
	if to <= from {
		n.log.Debug("format level not raised", "in_use", from, "readable", fsm.FormatReadable, "why", why)
		return 0
	}
	// Every member confirms with an answer to a question asked after the
	// decision, so given after it: one
	// restarted on another build since its last answer answers less, or
	// not in time. What is left is the time from its confirmation to the
	// commit (docs/compatibility.md).
	if to, why = n.confirmFormat(term, decided, to); to <= from {
		n.log.Debug("format level not raised: not confirmed", "in_use", from, "why", why)
		return 0
	}
	// A test may change the configuration or the leader here, between the
	// check and the commit (faults_enabled.go).
	faultPoint(pointRaiseFormat, n)
	if !n.leadsIn(term) {
		return 0 // leadership changed: the next leader decides afresh
	}
	c := fsm.Command{Op: fsm.OpFormat, Level: uint8(to)}
	f := n.raft.Apply(c.Encode(nil), 10*time.Second)
	if err := f.Error(); err != nil {
		n.log.Warn("could not commit a raise of the format level; the leader will try again", "from", from, "to", to, "err", err)
		return 0
	}
	if r, ok := f.Response().(*fsm.Result); !ok || r.Code != fsm.Recorded {
		return 0
	}
	n.log.Info("raised the cluster's format level: every member reads it", "from", from, "to", to, "term", term, "members", why)
	return to
}

// confirmFormat waits up to formatConfirmWait for every member to answer
// after decided that it reads level to, and returns to and what they said,
// or 0 and why not.
func (n *Node) confirmFormat(term uint64, decided time.Time, to uint64) (uint64, string) {
	tick := time.NewTicker(formatConfirmPoll)
	defer tick.Stop()
	deadline := time.NewTimer(formatConfirmWait)
	defer deadline.Stop()
	for {
		got, why := n.formatAllRead(term, decided)
		if got >= to {
			return to, why
		}
		select {
		case <-n.stopCh:
			return 0, "stopping"
		case <-deadline.C:
			return 0, why
		case <-tick.C:
		}
		if !n.leadsIn(term) {
			return 0, "leadership lost"
		}
	}
}

// formatAllRead returns the highest format level that every server of the
// latest configuration reads, as they told this leadership (term) after
// since, and what it saw (or why it is lower than this build's). The
// configuration is the latest, committed or not.
func (n *Node) formatAllRead(term uint64, since time.Time) (uint64, string) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return 0, err.Error()
	}
	// Fresh answers only (a few probe rounds): a member may be restarted
	// on another build after it answered. The window left is documented
	// (docs/compatibility.md).
	limit, _ := n.HealthLimits()
	limit = min(limit, formatAnswerFresh)
	now := time.Now()
	level := fsm.FormatReadable
	var seen []string
	n.health.mu.Lock()
	defer n.health.mu.Unlock()
	for _, s := range f.Configuration().Servers {
		id := string(s.ID)
		if id == n.id {
			seen = append(seen, fmt.Sprintf("%s:%d", id, fsm.FormatReadable))
			continue
		}
		// Counted from when it was asked: the member may have answered
		// at once, and been restarted on another build while the answer
		// was on its way.
		r, ok := n.health.reports[id]
		if !ok || n.health.term != term || now.Sub(r.asked) > limit || !r.asked.After(since) {
			return 0, fmt.Sprintf("member %s has not answered the probe lately", id)
		}
		level = min(level, r.progress.FormatReadable)
		seen = append(seen, fmt.Sprintf("%s:%d", id, r.progress.FormatReadable))
	}
	return level, strings.Join(seen, " ")
}

// giveUps reports whether a release may carry the give-up flag
// (fsm.Command.GiveUp): the cluster's level is 1 or more. A release
// proposed at level 0 just before a raise commits goes without it, as at
// level 0: the flag is only ever written once every member reads it.
func (n *Node) giveUps() bool { return n.table.Format() >= 1 }

// checkJoinFormat refuses a server that reads format levels only up to
// readable when the cluster uses a higher one. Call it with
// formatGate.mu held, on a ready leader.
func (n *Node) checkJoinFormat(id string, readable uint64) error {
	if inUse := n.table.Format(); readable < inUse {
		return fmt.Errorf("%w: %q reads format levels up to %d, and the cluster is at format level %d: run a build that reads level %d on it (docs/compatibility.md)",
			ErrFormatRefused, id, readable, inUse, inUse)
	}
	return nil
}

// unreadable is the error of a node that met fe.
func unreadable(fe *fsm.FormatError) error {
	need := fmt.Sprintf("format level %d", fe.Level)
	if fe.Level == 0 {
		need = fmt.Sprintf("snapshot version %d", fe.SnapshotVersion)
	}
	return fmt.Errorf("%w: %v (this is fencer %s); stopped: upgrade this node to a build that reads %s, or remove it from the cluster and start it empty (docs/compatibility.md)",
		ErrUnreadableFormat, strings.TrimPrefix(fe.Error(), "fsm: "), version.Version, need)
}

// refuseUnreadable records in dir that the node stopped for fe, so that it
// refuses to start there again.
func refuseUnreadable(dir string, fe *fsm.FormatError) error {
	if dir == "" {
		return nil
	}
	body := fmt.Sprintf("level %d snapshot %d index %d\n%s\n", fe.Level, fe.SnapshotVersion, fe.Index, unreadable(fe))
	return atomicfile.Write(filepath.Join(dir, formatRefusedFile), []byte(body), 0o600)
}

// checkRefused returns the error a node recorded in dir when it stopped
// for a format it cannot read, if this build cannot read that format
// either; a build that can removes the record.
func checkRefused(dir string) error {
	path := filepath.Join(dir, formatRefusedFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("server: reading %s: %w", path, err)
	}
	fe := &fsm.FormatError{}
	first, _, _ := strings.Cut(string(b), "\n")
	if _, err := fmt.Sscanf(first, "level %d snapshot %d index %d", &fe.Level, &fe.SnapshotVersion, &fe.Index); err != nil {
		return fmt.Errorf("server: %s is not what fencerd writes (%q): remove it only if the data directory's format is known to be readable", path, first)
	}
	if fe.Readable() {
		return os.Remove(path)
	}
	return unreadable(fe)
}

// readyTerm returns the term in which this node is a ready leader.
func (g *grants) readyTerm() (uint64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.readyLocked() {
		return 0, false
	}
	return g.readiness.term, true
}

// halt stops the applier for good: entries after fe's are not applied, no
// snapshot is taken, and Stopped reports the error. Called on the FSM
// goroutine, after the grants were halted (grants.halt or haltLocked):
// until Raft is shut down the node may still lead, or be elected, and must
// not serve from a table it stopped applying.
func (a *applier) halt(fe *fsm.FormatError) {
	if a.stopped {
		return
	}
	a.stopped = true
	err := unreadable(fe)
	if rerr := refuseUnreadable(a.id.dir, fe); rerr != nil {
		err = fmt.Errorf("%w (and recording it in the data directory failed: %v)", err, rerr)
	}
	a.halted <- err
	a.haltSeen.Store(true)
	if f := a.onHalt.Load(); f != nil {
		(*f)()
	}
}

// errHalted answers a snapshot of a halted applier.
var errHalted = errors.New("server: stopped applying: the cluster's data is in a format this build cannot read")
