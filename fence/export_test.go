package fence

// RWMemoryWaiting returns how many operations wait for their turn on the
// resource, for tests that must know a waiter has queued.
func RWMemoryWaiting(m *RWMemory, name string) int {
	r := m.resource(name)
	r.gate.mu.Lock()
	defer r.gate.mu.Unlock()
	return len(r.gate.queue)
}
