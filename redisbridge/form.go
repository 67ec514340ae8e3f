package redisbridge

import (
	"context"
	"crypto/tls"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/server"
)

// Formation of a cluster by servers started alike (server/form.go): each
// asks the others, at their client addresses, what FENCE.FORMING reports.

// formingTimeout bounds one FENCE.FORMING round trip.
const formingTimeout = 2 * time.Second

// former is implemented by nodes that report themselves to formation.
type former interface {
	FormingReport() server.FormingReport
}

// forming: FENCE.FORMING → a map of this node's own state, answered by the
// node itself, with or without a leader: id, raft_addr, expect (its
// --bootstrap-expect, 0 if none), cluster_id ("" before it applied one),
// replayed (1 once it applied the log it restarted with, else 0) and
// members, its Raft configuration (empty before it has one), one
// [id, raft-addr, client-addr] per server (client-addr "" until recorded).
func (b *Bridge) forming(r *request) {
	if len(r.args) != 1 {
		wrongArity(r)
		return
	}
	f, ok := b.locker.(former)
	if !ok {
		writeError(r.c, errf("this server does not take part in formation"))
		return
	}
	rep := f.FormingReport()
	r.mapHeader(6)
	r.c.WriteBulkString("id")
	r.c.WriteBulkString(rep.ID)
	r.c.WriteBulkString("raft_addr")
	r.c.WriteBulkString(rep.RaftAddr)
	r.c.WriteBulkString("expect")
	r.c.WriteInt(rep.Expect)
	r.c.WriteBulkString("cluster_id")
	r.c.WriteBulkString(rep.ClusterID)
	r.c.WriteBulkString("replayed")
	if rep.Replayed {
		r.c.WriteInt(1)
	} else {
		r.c.WriteInt(0)
	}
	r.c.WriteBulkString("members")
	r.c.WriteArray(len(rep.Members))
	for _, m := range rep.Members {
		r.c.WriteArray(3)
		r.c.WriteBulkString(m.ID)
		r.c.WriteBulkString(m.RaftAddr)
		r.c.WriteBulkString(m.ClientAddr)
	}
}

// Survey asks every address in addrs at once for its FENCE.FORMING report
// and returns those that answered; it logs, at debug level, those that did
// not (an address that does not resolve yet or a server not started yet is
// formation's normal state). Authentication and TLS are as for
// JoinClusterAs.
func Survey(ctx context.Context, addrs []string, user, password string, tlsCfg *tls.Config, log *slog.Logger) []server.FormingReport {
	auth := authCommand(user, password)
	cmd := resp.Command("FENCE.FORMING")
	out := make([]*server.FormingReport, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := roundTrip(ctx, addr, auth, cmd, tlsCfg, formingTimeout)
			if err == nil && v.Kind == resp.Error {
				log.Debug("FENCE.FORMING refused", "via", addr, "reply", v.Str)
				return
			}
			if err != nil {
				log.Debug("FENCE.FORMING failed", "via", addr, "err", err)
				return
			}
			rep, ok := parseForming(v)
			if !ok {
				log.Debug("FENCE.FORMING: unexpected reply", "via", addr)
				return
			}
			out[i] = &rep
		}()
	}
	wg.Wait()
	var reps []server.FormingReport
	for _, r := range out {
		if r != nil {
			reps = append(reps, *r)
		}
	}
	return reps
}

// parseForming reads a FENCE.FORMING reply (a RESP2 array of pairs, or a
// RESP3 map); unknown keys, which a later version may add, are skipped.
func parseForming(v resp.Value) (server.FormingReport, bool) {
	var r server.FormingReport
	if len(v.Elems)%2 != 0 {
		return r, false
	}
	for i := 0; i < len(v.Elems); i += 2 {
		val := v.Elems[i+1]
		switch v.Elems[i].Str {
		case "id":
			r.ID = val.Str
		case "raft_addr":
			r.RaftAddr = val.Str
		case "cluster_id":
			r.ClusterID = val.Str
		case "replayed":
			r.Replayed = val.Kind == resp.Integer && val.Int == 1
		case "expect":
			n, err := strconv.Atoi(val.Str)
			if val.Kind == resp.Integer {
				n, err = int(val.Int), nil
			}
			if err != nil {
				return r, false
			}
			r.Expect = n
		case "members":
			for _, m := range val.Elems {
				if len(m.Elems) < 3 {
					return r, false
				}
				r.Members = append(r.Members, server.FormingMember{ID: m.Elems[0].Str, RaftAddr: m.Elems[1].Str, ClientAddr: m.Elems[2].Str})
			}
		}
	}
	return r, r.ID != "" && r.RaftAddr != ""
}
