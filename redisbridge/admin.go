package redisbridge

import "context"

// Cluster administration commands. Every node answers FENCE.LEADER and
// FENCE.MEMBERS itself; JOIN, REMOVE and TRANSFER run on the leader and are
// forwarded there like any write.

// leader: FENCE.LEADER → [id, client-addr] of the leader, null if none known.
func (b *Bridge) leader(r *request) {
	if len(r.args) != 1 {
		wrongArity(r)
		return
	}
	id, addr := b.locker.Leader()
	if id == "" {
		r.c.WriteNull()
		return
	}
	r.c.WriteArray(2)
	r.c.WriteBulkString(id)
	r.c.WriteBulkString(addr)
}

// members: FENCE.MEMBERS → one [id, raft-addr, client-addr, role] per member.
func (b *Bridge) members(r *request) {
	if len(r.args) != 1 {
		wrongArity(r)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	ms, err := b.locker.Members(ctx)
	if err != nil {
		writeErr(r.c, err)
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
func (b *Bridge) join(r *request) {
	if len(r.args) != 4 {
		wrongArity(r)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	b.writeOK(ctx, r, b.locker.Join(ctx, string(r.args[1]), string(r.args[2]), string(r.args[3])))
}

// remove: FENCE.REMOVE id → OK once the node is no longer a member.
func (b *Bridge) remove(r *request) {
	if len(r.args) != 2 {
		wrongArity(r)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	b.writeOK(ctx, r, b.locker.Remove(ctx, string(r.args[1])))
}

// transfer: FENCE.TRANSFER [id] → OK once leadership moved (to id, or to the
// most up-to-date follower).
func (b *Bridge) transfer(r *request) {
	if len(r.args) > 2 {
		wrongArity(r)
		return
	}
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
	if len(r.args) != 1 {
		wrongArity(r)
		return
	}
	r.conn.forwarded = true
	r.c.WriteString("OK")
}

func (b *Bridge) writeOK(ctx context.Context, r *request, err error) {
	if err != nil {
		b.fail(ctx, r, err)
		return
	}
	r.c.WriteString("OK")
}

// stateHasher is implemented by nodes that can hash their lock table.
type stateHasher interface {
	StateHash() (appliedIndex uint64, hash string)
}

// statehash: FENCE.STATEHASH → [applied-index, sha256-hex] of this node's
// own lock table, never forwarded. Nodes that applied the same log answer the
// same; the fault campaign compares them.
func (b *Bridge) statehash(r *request) {
	if len(r.args) != 1 {
		wrongArity(r)
		return
	}
	h, ok := b.locker.(stateHasher)
	if !ok {
		writeError(r.c, errf("this server cannot hash its state"))
		return
	}
	idx, sum := h.StateHash()
	r.c.WriteArray(2)
	r.c.WriteUint64(idx)
	r.c.WriteBulkString(sum)
}
