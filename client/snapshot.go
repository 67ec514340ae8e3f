package client

import (
	"context"
	"fmt"
)

// Snapshot returns the cluster's lock table as snapshot bytes, read on the
// leader once it has confirmed it leads (FENCE.SNAPSHOT). Saved to a file,
// they seed a new cluster: fencerd --restore FILE (see docs/operations.md).
// The bytes are opaque to the client.
func (c *Client) Snapshot(ctx context.Context) ([]byte, error) {
	v, _, err := c.exchange(ctx, c.standard(), "FENCE.SNAPSHOT")
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("client: unexpected reply to FENCE.SNAPSHOT: %T", v)
	}
	return []byte(s), nil
}
