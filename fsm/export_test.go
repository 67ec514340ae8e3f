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
