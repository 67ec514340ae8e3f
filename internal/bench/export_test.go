package bench

// Addrs returns the nodes' RESP addresses.
func (c *FencerCluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr)
	}
	return a
}
