package fsm

// EncodeEntry appends the entry that holds cmds (JoinEntries of their Encode
// forms). The server joins already encoded commands; the tests encode
// batches from Commands.
func EncodeEntry(dst []byte, cmds []Command) []byte {
	if len(cmds) == 1 {
		return cmds[0].Encode(dst)
	}
	entries := make([][]byte, len(cmds))
	for i, c := range cmds {
		entries[i] = c.Encode(nil)
	}
	return JoinEntries(dst, entries)
}

// ApplyCommand applies an already decoded command at index. It is Apply
// without the decoding.
func (t *Table) ApplyCommand(index uint64, c Command) *Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.apply(index, &c)
}

// MaxToken returns the largest token ever granted (or the floor, if larger).
func (t *Table) MaxToken() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return max(t.maxToken, t.floor)
}
