package server

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
)

// batcher is the leader's group commit. Every command goes through it to
// Raft; while an entry of its own is being committed, the commands proposed
// meanwhile wait and then go to Raft together, up to maxCmds (and
// fsm.MaxEntrySize bytes) in one entry. A busy leader so writes, replicates,
// decodes and answers one entry where it would have handled dozens, and an
// idle one sends each command at once.
//
// One entry in flight (window 1) is deliberate: it beat letting Raft
// pipeline two or four smaller entries on one and three nodes
// (docs/performance-log.md, What changed in the server), as each commit
// round then carries every command that arrived during the previous one.
//
// No goroutine hand-off stands between Raft and the next entry: a request
// finding nothing in flight sends its entry itself (submitAndSend), and the
// goroutine that sees an entry committed sends the next one before it
// answers the first's commands. Only the node's own commands (from the apply
// path, which must not block, the expiry loop and a new leader's member
// record) are sent by the batcher's goroutine when nothing is in flight.
//
// The commands of an entry are applied one after the other as if each had an
// entry of its own (fsm.Table.Apply), so batching changes no outcome, and
// commands proposed on this node reach the log in the order they were
// submitted.
type batcher struct {
	apply   func(data []byte) raft.ApplyFuture
	maxCmds int
	window  int

	sendMu sync.Mutex // held while an entry is taken from the queue and sent

	mu       sync.Mutex
	queue    []proposal
	seq      uint64 // the id of the last proposal queued
	inflight int    // entries sent and not yet answered
	stopped  bool   // no more entries; everything left is answered with errNotSent
	wake     chan struct{}
	done     chan struct{}

	// stats, for tests and metrics: entries sent and commands in them.
	entries, cmds uint64
}

// proposal is one command waiting for its entry.
type proposal struct {
	id   uint64 // for withdraw
	data []byte // the command's Encode form
	// answer receives the command's result or the entry's error (raft's,
	// untranslated). It runs on the batcher's own goroutines, never under
	// a lock of theirs, and must not block.
	answer func(*fsm.Result, error)
}

// errNotSent answers the commands still queued when the batcher stops: they
// never reached Raft. It wraps raft.ErrRaftShutdown.
var errNotSent = fmt.Errorf("%w: the command was not sent before the node shut down", raft.ErrRaftShutdown)

func newBatcher(apply func([]byte) raft.ApplyFuture, maxCmds, window int) *batcher {
	if maxCmds <= 1 {
		// No grouping: every command goes to Raft at once, as it comes.
		maxCmds, window = 1, math.MaxInt
	}
	b := &batcher{apply: apply, maxCmds: maxCmds, window: max(window, 1),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go b.run()
	return b
}

// submit queues a command in its Encode form; answer is called once with its
// outcome, on another goroutine. It never blocks: the apply path calls it.
// The batcher's own goroutine sends the entry.
func (b *batcher) submit(data []byte, answer func(*fsm.Result, error)) {
	if _, ok := b.enqueue(data, answer); ok {
		b.signal()
	}
}

// submitAndSend is submit for a caller that may block on Raft's queue (a
// request's goroutine): if no entry is in flight it sends one itself, which
// spares an idle leader a goroutine hand-off per command. It returns the
// command's id, for withdraw.
func (b *batcher) submitAndSend(data []byte, answer func(*fsm.Result, error)) uint64 {
	id, ok := b.enqueue(data, answer)
	if ok {
		b.sendNext()
	}
	return id
}

// enqueue queues a command and returns its id; after stop it answers it with
// errNotSent instead and reports false.
func (b *batcher) enqueue(data []byte, answer func(*fsm.Result, error)) (uint64, bool) {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		go answer(nil, errNotSent)
		return 0, false
	}
	b.seq++
	id := b.seq
	b.queue = append(b.queue, proposal{id: id, data: data, answer: answer})
	b.mu.Unlock()
	return id, true
}

// withdraw takes the command with this id out of the queue if it has not been
// sent to Raft, and reports whether it did: a withdrawn command never takes
// effect, and its answer is never called. A request whose context ends while
// it waits for an entry so fails with a definite outcome, not an unknown one.
func (b *batcher) withdraw(id uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.queue {
		if b.queue[i].id == id {
			b.queue = slices.Delete(b.queue, i, i+1)
			return true
		}
	}
	return false
}

func (b *batcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// stop answers whatever is still queued with errNotSent and ends
// the loop; entries already sent are answered by Raft. Call it after Raft has
// shut down (so that no send can block on Raft's queue).
func (b *batcher) stop() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.stopped = true
	left := b.queue
	b.queue = nil
	b.mu.Unlock()
	b.signal()
	<-b.done
	for _, p := range left {
		p.answer(nil, errNotSent)
	}
}

// run sends what submit queued, whenever the window has room.
func (b *batcher) run() {
	defer close(b.done)
	for range b.wake {
		b.mu.Lock()
		stopped := b.stopped
		b.mu.Unlock()
		if stopped {
			return
		}
		for b.sendNext() {
		}
	}
}

// sendNext sends the next entry if there is a command queued and room in the
// window, and reports whether it sent one. Sends are serialised by sendMu, so
// commands reach Raft in the order they were queued; it is never held by
// submit, whose callers must not block.
func (b *batcher) sendNext() bool {
	b.sendMu.Lock()
	defer b.sendMu.Unlock()
	b.mu.Lock()
	if b.stopped || len(b.queue) == 0 || b.inflight >= b.window {
		b.mu.Unlock()
		return false
	}
	take := b.take()
	b.inflight++
	b.entries++
	b.cmds += uint64(len(take))
	b.mu.Unlock()

	datas := make([][]byte, len(take))
	for i, p := range take {
		datas[i] = p.data
	}
	f := b.apply(fsm.JoinEntries(nil, datas))
	go b.deliver(f, take)
	return true
}

// take removes the commands of the next entry from the queue: at least one,
// at most maxCmds and, past the first, no more than fit in fsm.MaxEntrySize.
func (b *batcher) take() []proposal {
	n, size := 1, len(b.queue[0].data)+16
	for n < len(b.queue) && n < b.maxCmds {
		size += len(b.queue[n].data) + 10
		if size > fsm.MaxEntrySize {
			break
		}
		n++
	}
	take := make([]proposal, n)
	copy(take, b.queue)
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return take
}

// deliver waits for the entry and answers its commands.
func (b *batcher) deliver(f raft.ApplyFuture, take []proposal) {
	err := f.Error()
	b.mu.Lock()
	b.inflight--
	b.mu.Unlock()
	// The next entry goes before this one's answers, from this goroutine:
	// Raft is idle until it does.
	b.sendNext()
	if err != nil {
		for _, p := range take {
			p.answer(nil, err)
		}
		return
	}
	switch r := f.Response().(type) {
	case *fsm.Result:
		if len(take) == 1 {
			take[0].answer(r, nil)
			return
		}
	case []*fsm.Result:
		if len(r) == len(take) {
			for i, p := range take {
				p.answer(r[i], nil)
			}
			return
		}
	}
	for _, p := range take {
		p.answer(nil, nil)
	}
}

// stats returns the entries sent so far and the commands they held.
func (b *batcher) stats() (entries, cmds uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.entries, b.cmds
}
