package client

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Status describes the current grant of a held lock, as the leader sees it.
type Status struct {
	Owner string
	Token uint64
	// Remaining is the time left on the leader's clock.
	Remaining time.Duration
}

// Status returns the current grant of the lock name; held is false if it is
// free. The read is linearizable: it reflects every grant and release
// acknowledged before it began.
func (c *Client) Status(ctx context.Context, name string) (s Status, held bool, err error) {
	if name == "" {
		return Status{}, false, fmt.Errorf("%w: empty lock name", ErrInvalidArgument)
	}
	v, _, err := c.exchange(ctx, c.standard(), "FENCE.STATUS", name)
	if err != nil {
		return Status{}, false, fmt.Errorf("status %q: %w", name, err)
	}
	if v == nil {
		return Status{}, false, nil
	}
	a, ok := v.([]any)
	if !ok || len(a) != 3 {
		return Status{}, false, fmt.Errorf("client: unexpected reply to FENCE.STATUS: %v", v)
	}
	owner, ok1 := a[0].(string)
	tok, ok2 := a[1].(int64)
	ms, ok3 := a[2].(int64)
	if !ok1 || !ok2 || !ok3 {
		return Status{}, false, fmt.Errorf("client: unexpected reply to FENCE.STATUS: %v", v)
	}
	return Status{Owner: owner, Token: uint64(tok), Remaining: time.Duration(ms) * time.Millisecond}, true, nil
}

// Check reports whether token is the current, unexpired grant of the lock
// name. It is a point-in-time answer, for diagnostics: to protect data, the
// storage must compare tokens itself, as part of each write.
func (c *Client) Check(ctx context.Context, name string, token uint64) (bool, error) {
	if name == "" {
		return false, fmt.Errorf("%w: empty lock name", ErrInvalidArgument)
	}
	v, _, err := c.exchange(ctx, c.standard(), "FENCE.CHECK", name, token)
	if err != nil {
		return false, fmt.Errorf("check %q: %w", name, err)
	}
	n, _ := v.(int64)
	return n == 1, nil
}

// Member is one node of the cluster.
type Member struct {
	ID         string
	RaftAddr   string
	ClientAddr string // empty until the node has recorded it
	Role       string // "leader", "follower" or "nonvoter"
}

// Members lists the cluster's members as the node asked sees them (this read
// is not linearizable).
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	v, _, err := c.exchange(ctx, c.standard(), "FENCE.MEMBERS")
	if err != nil {
		return nil, fmt.Errorf("members: %w", err)
	}
	rows, ok := v.([]any)
	if !ok && v != nil {
		return nil, fmt.Errorf("client: unexpected reply to FENCE.MEMBERS: %v", v)
	}
	out := make([]Member, 0, len(rows))
	for _, r := range rows {
		// Rows may have more fields than these four in a later version.
		f, ok := r.([]any)
		if !ok || len(f) < 4 {
			return nil, fmt.Errorf("client: unexpected reply to FENCE.MEMBERS: %v", v)
		}
		var m Member
		for i, dst := range []*string{&m.ID, &m.RaftAddr, &m.ClientAddr, &m.Role} {
			if *dst, ok = f[i].(string); !ok {
				return nil, fmt.Errorf("client: unexpected reply to FENCE.MEMBERS: %v", v)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// Leader returns the leader's ID and client address as the node asked knows
// them; both are empty if it knows no leader.
func (c *Client) Leader(ctx context.Context) (id, clientAddr string, err error) {
	v, _, err := c.exchange(ctx, c.standard(), "FENCE.LEADER")
	if err != nil {
		return "", "", fmt.Errorf("leader: %w", err)
	}
	a, _ := v.([]any)
	if len(a) == 2 {
		id, _ = a[0].(string)
		clientAddr, _ = a[1].(string)
	}
	return id, clientAddr, nil
}

// NodeInfo is what a node says about itself: its ID and the fencer version
// it runs (INFO's server section).
type NodeInfo struct {
	ID         string
	Version    string // fencer's release, such as "0.1.0"
	Commit     string // the commit it was built from; empty if unknown
	CommitTime string // that commit's time, RFC 3339; empty if unknown
	Role       string // "leader" or "follower", as the node sees itself
}

// NodeInfo asks the node the client is talking to (the first of its
// addresses that answers) about itself. A client made with one address
// asks that node.
func (c *Client) NodeInfo(ctx context.Context) (NodeInfo, error) {
	v, _, err := c.exchange(ctx, c.standard(), "INFO", "server")
	if err != nil {
		return NodeInfo{}, fmt.Errorf("info: %w", err)
	}
	text, ok := v.(string)
	if !ok {
		return NodeInfo{}, fmt.Errorf("client: unexpected reply to INFO: %v", v)
	}
	var ni NodeInfo
	fields := map[string]*string{"fencer_node_id": &ni.ID, "fencer_version": &ni.Version,
		"fencer_commit": &ni.Commit, "fencer_commit_time": &ni.CommitTime, "fencer_role": &ni.Role}
	for line := range strings.Lines(text) {
		k, val, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if dst := fields[k]; dst != nil {
			*dst = val
		}
	}
	if ni.Version == "" {
		return NodeInfo{}, fmt.Errorf("client: INFO names no fencer_version: not a fencer node?")
	}
	return ni, nil
}

// Join adds the node id, reachable by the other nodes at raftAddr and by
// clients at clientAddr, to the cluster as a voter, or updates its
// addresses. It returns once the node is a voter. Joining again with the
// same addresses does nothing, so it is safe to retry. fencerd --join does
// this itself.
func (c *Client) Join(ctx context.Context, id, raftAddr, clientAddr string) error {
	if id == "" || raftAddr == "" || clientAddr == "" {
		return fmt.Errorf("%w: join needs a node id, a raft address and a client address", ErrInvalidArgument)
	}
	if _, _, err := c.exchange(ctx, c.admin(), "FENCE.JOIN", id, raftAddr, clientAddr); err != nil {
		return fmt.Errorf("join %q: %w", id, err)
	}
	return nil
}

// Remove removes the node id from the cluster. Removing a node that is not
// a member is an error wrapping ErrInvalidArgument.
//
// A remove whose outcome is unknown is retried; if the first attempt did
// take effect, the retry reports that the node is not a member.
func (c *Client) Remove(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty node id", ErrInvalidArgument)
	}
	if _, _, err := c.exchange(ctx, c.admin(), "FENCE.REMOVE", id); err != nil {
		return fmt.Errorf("remove %q: %w", id, err)
	}
	return nil
}

// admin is the retry policy of membership changes, which can take as long
// as the server's own request timeout (10s by default): a new member has to
// catch up before it votes.
func (c *Client) admin() retry {
	return retry{
		attempt:  func() time.Duration { return max(c.cfg.requestTimeout, adminTimeout) },
		failover: c.cfg.failoverTimeout,
	}
}

// adminTimeout is the shortest attempt timeout of membership changes: longer
// than the server's default request timeout, so that its answer arrives.
const adminTimeout = 12 * time.Second
