package redisbridge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/internal/version"
	"github.com/fencerlock/fencer/server"
)

// Member health. The leader asks every other member for its progress once
// a second (FENCE.PROGRESS at the member's client address, over the
// forwarding connections) and records each answer with the node, which
// judges it (server.Node.MemberHealth). FENCE.HEALTH answers from that, on
// the leader.

// healthNode is what member health needs of the node.
type healthNode interface {
	// Progress is this node's own (FENCE.PROGRESS).
	Progress() server.Progress
	// RecordProgress records a member's answer to the leader's probe,
	// asked at asked.
	RecordProgress(id string, asked time.Time, p server.Progress, version string)
	// MemberHealth judges every member, on the leader (FENCE.HEALTH).
	MemberHealth(ctx context.Context, version string) ([]server.MemberHealth, error)
	HealthLimits() (unreachable time.Duration, lag uint64)
}

// probeInterval is how often the leader asks each member.
const probeInterval = time.Second

// probeMembers runs until the bridge closes: on the leader, every
// probeInterval it asks each member at once, each within probeInterval.
func (b *Bridge) probeMembers() {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		if id, _ := b.locker.Leader(); id != b.locker.ID() {
			continue
		}
		b.probeOnce()
	}
}

// probeOnce asks every member but this node for its progress and records
// each answer.
func (b *Bridge) probeOnce() {
	ctx, cancel := context.WithTimeout(b.ctx, probeInterval)
	defer cancel()
	// Each answer tells what its member ran at some moment after this,
	// at the address it had then or later: the format gate counts it
	// from here.
	asked := time.Now()
	ms, err := b.locker.Members(ctx)
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	for _, m := range ms {
		if m.ID == b.locker.ID() || m.ClientAddr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, v, err := b.askProgress(ctx, m.ClientAddr)
			if err != nil {
				b.log.Debug("member health probe failed", "member", m.ID, "addr", m.ClientAddr, "err", err)
				return
			}
			if p.id != m.ID {
				// Another node answers at that address (a replaced node
				// not yet recorded): it says nothing of this member.
				b.log.Debug("member health probe answered by another node", "member", m.ID, "answered", p.id)
				return
			}
			b.locker.RecordProgress(m.ID, asked, p.Progress, v)
		}()
	}
	wg.Wait()
}

// memberProgress is a member's answer to FENCE.PROGRESS.
type memberProgress struct {
	server.Progress
	id string
}

// askProgress sends FENCE.PROGRESS to addr and decodes the answer.
func (b *Bridge) askProgress(ctx context.Context, addr string) (memberProgress, string, error) {
	raw, _, err := b.fwd.roundTrip(ctx, addr, 2, resp.Command("FENCE.PROGRESS"))
	if err != nil {
		return memberProgress{}, "", err
	}
	v, err := resp.ReadValue(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return memberProgress{}, "", err
	}
	if v.Kind == resp.Error {
		return memberProgress{}, "", fmt.Errorf("%s", v.Str)
	}
	f := make(map[string]resp.Value, len(v.Elems)/2)
	for i := 0; i+1 < len(v.Elems); i += 2 {
		f[v.Elems[i].Str] = v.Elems[i+1]
	}
	num := func(k string) uint64 { n, _ := strconv.ParseUint(f[k].Str, 10, 64); return n }
	p := memberProgress{id: f["id"].Str, Progress: server.Progress{
		Role: f["role"].Str, Term: num("term"), LastIndex: num("last_index"),
		CommitIndex: num("commit_index"), Applied: num("applied_index"), LastContact: -1,
		// A build from before format levels does not say: 0.
		FormatReadable: num("format_readable"),
	}}
	if ms, err := strconv.ParseInt(f["last_contact_ms"].Str, 10, 64); err == nil && ms >= 0 {
		p.LastContact = time.Duration(ms) * time.Millisecond
	}
	return p, f["version"].Str, nil
}

// progress: FENCE.PROGRESS → a map of this node's own progress: id, role,
// term, last_index, commit_index, applied_index, last_contact_ms (-1:
// never heard from a leader), version, format_readable (the highest
// format level its build reads) and format_in_use (the cluster's, as it
// applied it), every value a string. Never
// forwarded; the leader's health probe sends it.
func (b *Bridge) progress(r *request) {
	p := b.locker.Progress()
	r.writeFields(
		"id", b.locker.ID(), "role", p.Role, "term", u64(p.Term), "last_index", u64(p.LastIndex),
		"commit_index", u64(p.CommitIndex), "applied_index", u64(p.Applied),
		"last_contact_ms", strconv.FormatInt(durationMS(p.LastContact), 10), "version", version.Version,
		"format_readable", u64(p.FormatReadable), "format_in_use", u64(b.locker.FormatInUse()))
}

// health: FENCE.HEALTH → the leader's view of every member, as a map:
// leader, commit_index, unreachable_after_ms, lag_limit and members, one
// map per member (see docs/protocol.md). Forwarded to the leader.
func (b *Bridge) health(r *request) {
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	hs, err := b.locker.MemberHealth(ctx, version.Version)
	if err != nil {
		b.fail(ctx, r, err)
		return
	}
	commit := b.locker.Progress().CommitIndex
	unreachable, lag := b.locker.HealthLimits()
	r.mapHeader(5)
	r.c.WriteBulkString("leader")
	r.c.WriteBulkString(b.locker.ID())
	r.c.WriteBulkString("commit_index")
	r.c.WriteInt64(int64(commit))
	r.c.WriteBulkString("unreachable_after_ms")
	r.c.WriteInt64(unreachable.Milliseconds())
	r.c.WriteBulkString("lag_limit")
	r.c.WriteInt64(int64(lag))
	r.c.WriteBulkString("members")
	r.c.WriteArray(len(hs))
	for _, h := range hs {
		last := int64(-1)
		if h.Answered {
			last = h.LastAnswer.Milliseconds()
		}
		r.mapHeader(15)
		for _, kv := range [][2]string{{"id", h.ID}, {"raft_addr", h.RaftAddr}, {"client_addr", h.ClientAddr}, {"role", h.Role}, {"version", h.Version}, {"problem", h.Problem}} {
			r.c.WriteBulkString(kv[0])
			r.c.WriteBulkString(kv[1])
		}
		for _, kv := range []struct {
			k string
			v int64
		}{
			{"healthy", boolInt(h.Healthy)}, {"reachable", boolInt(h.Reachable)}, {"last_answer_ms", last},
			{"last_contact_ms", durationMS(h.Progress.LastContact)}, {"applied_index", int64(h.Progress.Applied)},
			{"commit_index", int64(h.Progress.CommitIndex)}, {"last_index", int64(h.Progress.LastIndex)}, {"lag", int64(h.Lag)},
			{"format_readable", int64(h.Progress.FormatReadable)},
		} {
			r.c.WriteBulkString(kv.k)
			r.c.WriteInt64(kv.v)
		}
	}
}

// writeFields writes pairs of strings as a map.
func (r *request) writeFields(kv ...string) {
	r.mapHeader(len(kv) / 2)
	for _, s := range kv {
		r.c.WriteBulkString(s)
	}
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

// durationMS is d in milliseconds, -1 for a negative d (unknown).
func durationMS(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
