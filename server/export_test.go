package server

import "context"

// Check reports whether token is the current, unexpired grant of key.
func (n *Node) Check(ctx context.Context, key string, token uint64) (bool, error) {
	s, held, err := n.Status(ctx, key)
	if err != nil {
		return false, err
	}
	return held && s.Token == token, nil
}
