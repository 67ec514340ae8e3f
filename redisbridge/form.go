package redisbridge

import "github.com/fencerlock/fencer/server"

// Formation of a cluster by servers started alike (server/form.go): each
// asks the others, at their client addresses, what FENCE.FORMING reports
// (fencerd's side is cmd/fencerd/form.go).

// formingNode is what formation needs of the node.
type formingNode interface {
	FormingReport() server.FormingReport
}

// forming: FENCE.FORMING → a map of this node's own state, answered by the
// node itself, with or without a leader: id, raft_addr, expect (its
// --bootstrap-expect, 0 if none), cluster_id ("" before it applied one),
// replayed (1 once its table caught up with what it knows committed, else
// 0), has_state (1 if it has any Raft state, applied or not), last_index
// (its log's), leader (1 if it is the cluster's ready leader and confirmed
// it with a quorum just now), leader_addr (the client address of the leader
// it knows, "" if none), seen (the IDs of the servers without state its
// latest round of formation reached, itself included, if none had state)
// and members, its Raft configuration (empty
// before it has one), one [id, raft-addr, client-addr, removed, ran] per
// server (client-addr "" until recorded; removed 1 for a tombstone; ran 1
// for a member recorded without its address: a leader recorded it as a
// voter before it granted anything).
func (b *Bridge) forming(r *request) {
	rep := b.locker.FormingReport()
	r.mapHeader(11)
	r.c.WriteBulkString("id")
	r.c.WriteBulkString(rep.ID)
	r.c.WriteBulkString("raft_addr")
	r.c.WriteBulkString(rep.RaftAddr)
	r.c.WriteBulkString("expect")
	r.c.WriteInt(rep.Expect)
	r.c.WriteBulkString("cluster_id")
	r.c.WriteBulkString(rep.ClusterID)
	r.c.WriteBulkString("replayed")
	r.c.WriteInt(flag(rep.Replayed))
	r.c.WriteBulkString("has_state")
	r.c.WriteInt(flag(rep.HasState))
	r.c.WriteBulkString("last_index")
	r.c.WriteUint64(rep.LastIndex)
	r.c.WriteBulkString("leader")
	r.c.WriteInt(flag(rep.Leader))
	r.c.WriteBulkString("leader_addr")
	r.c.WriteBulkString(rep.LeaderAddr)
	r.c.WriteBulkString("seen")
	r.c.WriteArray(len(rep.Seen))
	for _, id := range rep.Seen {
		r.c.WriteBulkString(id)
	}
	r.c.WriteBulkString("members")
	r.c.WriteArray(len(rep.Members))
	for _, m := range rep.Members {
		r.c.WriteArray(5)
		r.c.WriteBulkString(m.ID)
		r.c.WriteBulkString(m.RaftAddr)
		r.c.WriteBulkString(m.ClientAddr)
		r.c.WriteInt(flag(m.Removed))
		r.c.WriteInt(flag(m.Ran))
	}
}

// flag is a boolean as RESP integer replies give it.
func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}
