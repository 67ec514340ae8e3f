package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// A joiner is fencerd as a client of the other servers' RESP ports, for
// joining a cluster (FENCE.JOIN), checking that it may (FENCE.MEMBERS,
// FENCE.CLUSTER) and surveying one that forms (FENCE.FORMING, form.go):
// the client side of what redisbridge serves, beside its only caller.
type joiner struct {
	// addrs are the --join addresses; self is this node's client address
	// (--advertise), which the checks do not ask.
	addrs []string
	self  string
	// user and password authenticate first (a user with pattern "*"); an
	// empty user sends no AUTH. A non-nil tls connects over TLS.
	user, password string
	tls            *tls.Config
	log            *slog.Logger
}

// newJoiner is the joiner of fencerd's configuration c.
func newJoiner(c *config, log *slog.Logger) *joiner {
	user, pass := forwardCredentials(c.bridge)
	return &joiner{addrs: c.join, self: c.node.ClientAddr, user: user, password: pass, tls: c.bridge.ForwardTLS, log: log}
}

// joinRetry is the pause between rounds of join attempts. A join waits
// for its configuration change to commit; FENCE.MEMBERS is answered at
// once, so a member that does not answer soon is skipped for the next.
const (
	joinRetry      = time.Second
	joinTimeout    = 15 * time.Second
	membersTimeout = 2 * time.Second
	dialTimeout    = 2 * time.Second
	// formingGrace is how long a joiner waits for the cluster it joins to
	// elect its first leader before it warns: nodes started together
	// (fencerd's own test harness, systemd on every host) ask before the
	// first node's election, a few election timeouts at most.
	formingGrace = joinTimeout
)

// errNoLeader is the state of a cluster that has not elected a leader
// yet, or has lost it.
var errNoLeader = errors.New("no leader known")

// join asks the cluster reachable at any of the addresses (client
// addresses of existing members) to add this node, with FENCE.JOIN, until
// one accepts or ctx ends. Any member will do: a follower forwards the join
// to the leader. Joining is idempotent, so retrying after an unknown outcome
// is safe.
func (j *joiner) join(ctx context.Context, id, raftAddr, clientAddr string) error {
	cmd := resp.Command("FENCE.JOIN", id, raftAddr, clientAddr)
	for {
		for _, addr := range j.addrs {
			v, err := j.roundTrip(ctx, addr, cmd, joinTimeout)
			if err == nil && v.Kind == resp.Error {
				err = errors.New(v.Str)
			}
			if err == nil && v.Str == "OK" {
				j.log.Info("joined the cluster", "via", addr)
				return nil
			}
			if err == nil {
				err = fmt.Errorf("unexpected reply %v", v)
			}
			j.log.Warn("join attempt failed", "via", addr, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("join: %w", ctx.Err())
		case <-time.After(joinRetry):
		}
	}
}

// errStillMember means a node without Raft state asked to join under the
// ID of a member: the member's state was lost, and joining again as it
// would let it vote and acknowledge entries it no longer has.
var errStillMember = errors.New("still a member")

// checkNotMember asks the cluster's leader, found through any of the
// addresses but self, whether id is a member, until the leader answers or
// ctx ends. It returns errStillMember if it is. A node that starts with no
// Raft state asks this before its Raft starts: a member whose data was lost
// must be removed (FENCE.REMOVE) before it joins again.
func (j *joiner) checkNotMember(ctx context.Context, id string) error {
	cmd := resp.Command("FENCE.MEMBERS")
	start := time.Now()
	for {
		for _, addr := range j.addrs {
			if addr == j.self {
				continue
			}
			leader, err := j.leaderMembers(ctx, addr, cmd)
			if err != nil {
				// A cluster with no leader yet is a healthy one forming, at
				// first; every other failure, and a leader missing for
				// longer, is the operator's to see.
				level := slog.LevelWarn
				if errors.Is(err, errNoLeader) && time.Since(start) < formingGrace {
					level = slog.LevelInfo
				}
				j.log.Log(ctx, level, "asking the cluster's members failed", "via", addr, "err", err)
				continue
			}
			for _, m := range leader {
				if m == id {
					return fmt.Errorf("%w: %q is a member of the cluster, and this data directory has no Raft state (its state was lost?): remove it first (FENCE.REMOVE %s through any member), then start it again with --join; see docs/operations.md", errStillMember, id, id)
				}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("asking the cluster's members: %w", ctx.Err())
		case <-time.After(joinRetry):
		}
	}
}

// leaderMembers returns the member IDs as the leader knows them: it asks
// addr, then the leader addr names, and takes the answer only if it comes
// from the leader (a follower may not have applied a removal yet).
func (j *joiner) leaderMembers(ctx context.Context, addr string, cmd []byte) ([]string, error) {
	for range 2 {
		v, err := j.roundTrip(ctx, addr, cmd, membersTimeout)
		if err != nil {
			return nil, err
		}
		if v.Kind == resp.Error {
			return nil, errors.New(v.Str)
		}
		var ids []string
		leader := ""
		for _, m := range v.Elems {
			if len(m.Elems) < 4 { // a later version may add fields
				return nil, fmt.Errorf("unexpected FENCE.MEMBERS reply %v", v)
			}
			ids = append(ids, m.Elems[0].Str)
			if m.Elems[3].Str == "leader" {
				leader = m.Elems[2].Str
			}
		}
		switch leader {
		case "":
			return nil, errNoLeader
		case addr:
			return ids, nil
		}
		addr = leader
	}
	return nil, errors.New("the leader changed while asking")
}

// errOtherCluster means a node that belongs to one cluster was given --join
// addresses of another.
var errOtherCluster = errors.New("the --join addresses belong to another cluster")

// checkCluster asks each of the addresses but self, once, which cluster it
// belongs to (FENCE.CLUSTER's id). A node with state calls it before its
// Raft starts, with the ID of the cluster it belongs to (own): if at least
// one address answers another ID and none answers own, it returns
// errOtherCluster, naming both; otherwise nil, so that a whole cluster
// restarting at once (no address answers yet) starts as before, and an
// address that answers no ID (a version without IDs, or a cluster whose
// leader has not committed one yet) counts for neither.
func (j *joiner) checkCluster(ctx context.Context, own string) error {
	cmd := resp.Command("FENCE.CLUSTER")
	var others []string
	other := ""
	for _, addr := range j.addrs {
		if addr == j.self {
			continue
		}
		v, err := j.roundTrip(ctx, addr, cmd, membersTimeout)
		if err != nil || v.Kind == resp.Error {
			j.log.Info("could not ask which cluster a --join address belongs to", "via", addr, "err", err, "reply", v.Str)
			continue
		}
		id := mapField(v, "id")
		switch id {
		case "":
		case own:
			return nil
		default:
			others, other = append(others, addr), id
		}
	}
	if other == "" {
		return nil
	}
	return fmt.Errorf("%w: this node belongs to cluster %s (its data directory says so), but %v belong to cluster %s, and none of the --join addresses to its own; "+
		"started, it would run beside that cluster as a second one. To make it a member of %s, stop it, move its data directory away and start it again with --join (it joins as a new member; see docs/operations.md, \"A node refuses to start\"); "+
		"to keep it in %s, give it that cluster's addresses", errOtherCluster, own, others, other, other, own)
}

// mapField returns the string value of key in a map reply (a RESP3 map or
// a RESP2 flat array), "" if absent.
func mapField(v resp.Value, key string) string {
	for i := 0; i+1 < len(v.Elems); i += 2 {
		if v.Elems[i].Str == key {
			return v.Elems[i+1].Str
		}
	}
	return ""
}

// roundTrip sends AUTH (if any) and cmd to addr on a new connection and
// returns cmd's reply, within timeout; a refused AUTH is the reply.
func (j *joiner) roundTrip(ctx context.Context, addr string, cmd []byte, timeout time.Duration) (resp.Value, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := j.dial(ctx, addr)
	if err != nil {
		return resp.Value{}, err
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	var auth []byte
	if j.user != "" {
		auth = resp.Command("AUTH", j.user, j.password)
	}
	if _, err := conn.Write(append(append([]byte(nil), auth...), cmd...)); err != nil {
		return resp.Value{}, err
	}
	rd := bufio.NewReader(conn)
	if auth != nil {
		v, err := resp.ReadValue(rd)
		if err != nil {
			return resp.Value{}, err
		}
		if v.Kind == resp.Error {
			return v, nil
		}
	}
	return resp.ReadValue(rd)
}

// dial connects to addr, over TLS if the joiner has a configuration.
func (j *joiner) dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	if j.tls != nil {
		td := tls.Dialer{NetDialer: &d, Config: j.tls}
		return td.DialContext(ctx, "tcp", addr)
	}
	return d.DialContext(ctx, "tcp", addr)
}
