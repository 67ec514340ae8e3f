package fsm

// WatchRead returns key's lease (held reports whether the key exists) and
// the position of the last applied command, read together under the
// table's read lock: the lease is the key's state as of exactly that
// position. A watch that cannot replay the changes a client missed starts
// from this state (server/watch.go).
func (t *Table) WatchRead(key string) (l Lease, held bool, pos uint64) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if p, ok := t.locks[key]; ok {
		l, held = *p, true
	}
	return l, held, t.floor + t.lastIndex
}
