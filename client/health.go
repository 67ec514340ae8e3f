package client

import (
	"context"
	"fmt"
	"time"
)

// MemberHealth is one member's health as the leader sees it.
type MemberHealth struct {
	Member
	Version string
	// Healthy is false when the member is unreachable for longer than the
	// cluster's limit or too far behind; Problem then says which.
	Healthy bool
	Problem string
	// Reachable: it answered the leader's probe (once a second) within
	// the cluster's unreachable limit.
	Reachable bool
	// LastAnswer is how long ago it last answered the leader's probe;
	// negative if it has not since this leader took over.
	LastAnswer time.Duration
	// LastContact is how long before its last answer it had last heard
	// from a leader, as it reported; negative if unknown.
	LastContact time.Duration
	// Applied is the last entry applied to its lock table, Commit the
	// highest it knew committed, LastIndex the last in its log.
	Applied, Commit, LastIndex uint64
	// Lag is how many entries its table is behind the leader's commit
	// index.
	Lag uint64
	// FormatReadable is the highest format level its build reads, as it
	// last told the leader (0: a build from before format levels, or not
	// asked yet); docs/compatibility.md.
	FormatReadable uint64
}

// ClusterHealth is the leader's view of the cluster.
type ClusterHealth struct {
	Leader      string // the leader's ID
	CommitIndex uint64 // the leader's commit index
	// UnreachableAfter and LagLimit are the limits past which a member is
	// unhealthy (fencerd --member-unreachable-after, --member-lag-limit).
	UnreachableAfter time.Duration
	LagLimit         uint64
	Members          []MemberHealth
}

// Unhealthy returns the members that are not healthy.
func (h ClusterHealth) Unhealthy() []MemberHealth {
	var out []MemberHealth
	for _, m := range h.Members {
		if !m.Healthy {
			out = append(out, m)
		}
	}
	return out
}

// Health returns the leader's view of every member (FENCE.HEALTH, answered
// by the leader; it needs an admin user).
func (c *Client) Health(ctx context.Context) (ClusterHealth, error) {
	v, _, err := c.exchange(ctx, c.standard(), "FENCE.HEALTH")
	if err != nil {
		return ClusterHealth{}, fmt.Errorf("health: %w", err)
	}
	bad := func() (ClusterHealth, error) {
		return ClusterHealth{}, fmt.Errorf("client: unexpected reply to FENCE.HEALTH: %v", v)
	}
	top, ok := fields(v)
	if !ok {
		return bad()
	}
	h := ClusterHealth{Leader: str(top["leader"]), CommitIndex: uint64(num(top["commit_index"])),
		UnreachableAfter: time.Duration(num(top["unreachable_after_ms"])) * time.Millisecond, LagLimit: uint64(num(top["lag_limit"]))}
	rows, ok := top["members"].([]any)
	if !ok {
		return bad()
	}
	for _, r := range rows {
		f, ok := fields(r)
		if !ok {
			return bad()
		}
		h.Members = append(h.Members, MemberHealth{
			Member:         Member{ID: str(f["id"]), RaftAddr: str(f["raft_addr"]), ClientAddr: str(f["client_addr"]), Role: str(f["role"])},
			Version:        str(f["version"]),
			Healthy:        num(f["healthy"]) == 1,
			Problem:        str(f["problem"]),
			Reachable:      num(f["reachable"]) == 1,
			LastAnswer:     msDuration(num(f["last_answer_ms"])),
			LastContact:    msDuration(num(f["last_contact_ms"])),
			Applied:        uint64(num(f["applied_index"])),
			Commit:         uint64(num(f["commit_index"])),
			LastIndex:      uint64(num(f["last_index"])),
			Lag:            uint64(num(f["lag"])),
			FormatReadable: uint64(num(f["format_readable"])),
		})
	}
	return h, nil
}

// fields reads a map reply: a RESP2 array of keys and values in turn, or a
// RESP3 map.
func fields(v any) (map[string]any, bool) {
	switch t := v.(type) {
	case []any:
		if len(t)%2 != 0 {
			return nil, false
		}
		m := make(map[string]any, len(t)/2)
		for i := 0; i < len(t); i += 2 {
			k, ok := t[i].(string)
			if !ok {
				return nil, false
			}
			m[k] = t[i+1]
		}
		return m, true
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, val := range t {
			ks, ok := k.(string)
			if !ok {
				return nil, false
			}
			m[ks] = val
		}
		return m, true
	}
	return nil, false
}

func str(v any) string { s, _ := v.(string); return s }

func num(v any) int64 { n, _ := v.(int64); return n }

// msDuration is ms milliseconds, or -1ns for a negative ms (unknown).
func msDuration(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// Revoke ends the current grant of the lock name, whoever holds it, and
// hands it to the first in line; it reports whether there was a holder.
// It needs an admin user. A revoke whose outcome is unknown is retried; a
// retry after one that took effect reports no holder.
func (c *Client) Revoke(ctx context.Context, name string) (bool, error) {
	if name == "" {
		return false, fmt.Errorf("%w: empty lock name", ErrInvalidArgument)
	}
	v, _, err := c.exchange(ctx, c.standard(), "FENCE.REVOKE", name)
	if err != nil {
		return false, fmt.Errorf("revoke %q: %w", name, err)
	}
	return num(v) == 1, nil
}

// TransferLeadership moves leadership to the member id, or, with id empty,
// to the most up-to-date follower, and returns once it moved. It needs an
// admin user.
func (c *Client) TransferLeadership(ctx context.Context, id string) error {
	args := []any{"FENCE.TRANSFER"}
	if id != "" {
		args = append(args, id)
	}
	if _, _, err := c.exchange(ctx, c.admin(), args...); err != nil {
		return fmt.Errorf("transfer: %w", err)
	}
	return nil
}
