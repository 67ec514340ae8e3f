package redisbridge

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"sync"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/internal/version"
	"github.com/fencerlock/fencer/server"
)

// Cluster administration commands. Every node answers FENCE.LEADER,
// FENCE.MEMBERS and FENCE.CLUSTER itself; JOIN, REMOVE and TRANSFER run on the leader and are
// forwarded there like any write.

// clusterNode is what the cluster commands, INFO and forwarding need of
// the node.
type clusterNode interface {
	ID() string
	// ClusterID is the cluster's ID, "" before one was committed.
	ClusterID() string
	Leader() (id, clientAddr string)
	Members(ctx context.Context) ([]server.Member, error)
	// PeerAddrs returns the client addresses of the other members.
	PeerAddrs() []string
	// JoinReading adds a voter whose build reads format levels up to
	// readable (refused below the cluster's level).
	JoinReading(ctx context.Context, id, raftAddr, clientAddr string, readable uint64) error
	// FormatInUse is the cluster's format level, as applied (INFO).
	FormatInUse() uint64
	Remove(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, id string) error
	// StateHash hashes this node's own lock table (FENCE.STATEHASH).
	StateHash() (appliedIndex uint64, hash string)
}

// leader: FENCE.LEADER → [id, client-addr] of the leader, null if none known.
func (b *Bridge) leader(r *request) {
	id, addr := b.locker.Leader()
	if id == "" {
		r.null()
		return
	}
	r.c.WriteArray(2)
	r.c.WriteBulkString(id)
	r.c.WriteBulkString(addr)
}

// members: FENCE.MEMBERS → one [id, raft-addr, client-addr, role] per member.
func (b *Bridge) members(r *request) {
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	ms, ok := b.memberList(ctx, r)
	if !ok {
		return
	}
	r.c.WriteArray(len(ms))
	for _, m := range ms {
		r.c.WriteArray(4)
		r.c.WriteBulkString(m.ID)
		r.c.WriteBulkString(m.RaftAddr)
		r.c.WriteBulkString(m.ClientAddr)
		r.c.WriteBulkString(m.Role)
	}
}

// join: FENCE.JOIN id raft-addr client-addr → OK once the node is a voter.
// The leader first asks the joiner, at its client address, which format
// levels it reads (FENCE.PROGRESS, as the health probe does): a build that
// does not say, or a node that does not answer as id, is taken to read
// level 0 only, and is refused by a cluster at a higher level.
func (b *Bridge) join(r *request) {
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	id, raftAddr, clientAddr := string(r.args[1]), string(r.args[2]), string(r.args[3])
	var readable uint64
	if lid, _ := b.locker.Leader(); lid == b.locker.ID() {
		pctx, pcancel := context.WithTimeout(ctx, probeInterval)
		p, _, err := b.askProgress(pctx, clientAddr)
		pcancel()
		switch {
		case err != nil:
			b.log.Warn("a joining server did not say which format levels it reads: taken as 0", "id", id, "client_addr", clientAddr, "err", err)
		case p.id != id:
			b.log.Warn("another node answers at a joining server's client address: its format levels taken as 0", "id", id, "client_addr", clientAddr, "answered", p.id)
		default:
			readable = p.FormatReadable
		}
	}
	b.writeOK(ctx, r, b.locker.JoinReading(ctx, id, raftAddr, clientAddr, readable))
}

// remove: FENCE.REMOVE id → OK once the node is no longer a member.
func (b *Bridge) remove(r *request) {
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	b.writeOK(ctx, r, b.locker.Remove(ctx, string(r.args[1])))
}

// transfer: FENCE.TRANSFER [id] → OK once leadership moved (to id, or to the
// most up-to-date follower).
func (b *Bridge) transfer(r *request) {
	id := ""
	if len(r.args) == 2 {
		id = string(r.args[1])
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	b.writeOK(ctx, r, b.locker.TransferLeadership(ctx, id))
}

// forwarded: FENCE.FORWARDED → OK. Sent first by a node that forwards
// commands over this connection; see connState.forwarded.
func (b *Bridge) forwarded(r *request) {
	r.conn.forwarded = true
	r.conn.nodeUser = r.conn.user
	r.c.WriteString("OK")
}

func (b *Bridge) writeOK(ctx context.Context, r *request, err error) {
	if err != nil {
		b.fail(ctx, r, err)
		return
	}
	r.c.WriteString("OK")
}

// statehash: FENCE.STATEHASH → [applied-index, sha256-hex] of this node's
// own lock table, never forwarded. Nodes that applied the same log answer the
// same; the fault campaign compares them.
func (b *Bridge) statehash(r *request) {
	idx, sum := b.locker.StateHash()
	r.c.WriteArray(2)
	r.c.WriteUint64(idx)
	r.c.WriteBulkString(sum)
}

// memberVersionWait bounds asking a member its version for FENCE.CLUSTER.
const memberVersionWait = time.Second

// cluster: FENCE.CLUSTER → a map: id (the cluster's ID, "" before one was
// committed), leader (the leader's node ID, "" if none is known) and
// members, one map per member: id, raft_addr, client_addr, role and
// version (what its INFO says, asked at its client address; "" if it did
// not answer within memberVersionWait). Answered by the node itself.
func (b *Bridge) cluster(r *request) {
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	ms, ok := b.memberList(ctx, r)
	if !ok {
		return
	}
	versions := b.memberVersions(ctx, ms)
	leader, _ := b.locker.Leader()
	r.mapHeader(3)
	r.c.WriteBulkString("id")
	r.c.WriteBulkString(b.locker.ClusterID())
	r.c.WriteBulkString("leader")
	r.c.WriteBulkString(leader)
	r.c.WriteBulkString("members")
	r.c.WriteArray(len(ms))
	for i, m := range ms {
		r.mapHeader(5)
		for _, kv := range [][2]string{{"id", m.ID}, {"raft_addr", m.RaftAddr}, {"client_addr", m.ClientAddr}, {"role", m.Role}, {"version", versions[i]}} {
			r.c.WriteBulkString(kv[0])
			r.c.WriteBulkString(kv[1])
		}
	}
}

// memberVersions asks every member but this node, at once, for its
// version (INFO's fencer_version); "" for one that does not answer in time.
func (b *Bridge) memberVersions(ctx context.Context, ms []server.Member) []string {
	out := make([]string, len(ms))
	ctx, cancel := context.WithTimeout(ctx, memberVersionWait)
	defer cancel()
	var wg sync.WaitGroup
	for i, m := range ms {
		if m.ID == b.locker.ID() {
			out[i] = version.Version
			continue
		}
		if m.ClientAddr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw, _, err := b.fwd.roundTrip(ctx, m.ClientAddr, 2, resp.Command("INFO", "server"))
			if err != nil {
				return
			}
			v, err := resp.ReadValue(bufio.NewReader(bytes.NewReader(raw)))
			if err != nil || v.Kind == resp.Error {
				return
			}
			out[i] = infoField(v.Str, "fencer_version")
		}()
	}
	wg.Wait()
	return out
}

// infoField returns the value of field in INFO's text, "" if absent.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// memberList returns the members for r (FENCE.MEMBERS or FENCE.CLUSTER),
// or answers the error and reports false.
func (b *Bridge) memberList(ctx context.Context, r *request) ([]server.Member, bool) {
	ms, err := b.locker.Members(ctx)
	if err != nil {
		writeErr(r.c, err)
		return nil, false
	}
	return ms, true
}
