package fence

import (
	"context"
	"sync"
)

// RWValidator runs the reads and writes of resources guarded by a
// read-write lock under the read-write fencing rule.
//
// A read-write lock's readers hold together, each with a token of its own,
// so the plain rule ("highest token wins", see Check) is wrong for them:
// readers 7 and 8 hold at once, reader 8 reads, and reader 7, whose lock is
// just as valid, would be refused. What a reader must not do is read after a
// newer writer has written. And a writer's token is larger than that of
// every earlier grant on the key, readers' included (fencer gives every
// grant the position of the entry that granted it, and grants a write lock
// only when every earlier holder has gone): a write with a token lower than
// any token the store has seen, a reader's included, comes from a writer
// whose lock has passed on, to readers or to another writer.
//
// So the store keeps two tokens per resource: W, the highest token of an
// admitted write, and H, the highest token of any admitted read or write.
//
//   - A read carrying token t is admitted if t >= W (no newer writer has
//     written), and raises H to t if t is higher. It does not raise W:
//     readers holding together with lower tokens are still admitted.
//   - A write carrying token t is admitted if t >= H (it is at least every
//     token seen, readers' included), and sets W and H to t. Equal is
//     admitted: a writer may write many times, and retry a write.
//
// A refusal is a *StaleTokenError whose Highest is W for a read and H for a
// write. The operations that land then keep the order of their tokens:
// writes land in token order, and a read with token t sees every write
// with a token up to t that will ever land and none with a higher one.
//
// AdmitRead and AdmitWrite run the check, the operation and the recording
// of its token as one atomic step with respect to every other operation on
// the same resource (reads may run together; a write runs alone). An
// operation that fails (returns an error) changes neither token. They
// return a *StaleTokenError if the token is stale (the operation is not
// run), the context's error if ctx ends before it could start, and
// otherwise what the operation returned.
type RWValidator interface {
	AdmitRead(ctx context.Context, resource string, token uint64, read func(context.Context) error) error
	AdmitWrite(ctx context.Context, resource string, token uint64, write func(context.Context) error) error
}

// RWMemory is an RWValidator for a store that lives in one process, and the
// reference implementation of the read-write rule. It keeps W and H of
// every resource it has seen, in memory. Reads of one resource run
// together, a write runs alone, and they take their turns in arrival order,
// so a stream of reads does not starve a write; operations on different
// resources run in parallel. Like Memory, it forgets nothing, and what it
// remembers is lost with the process.
//
// The zero value is ready to use. An RWMemory must not be copied after
// first use.
type RWMemory struct {
	// mu guards the map and every resource's tokens; each resource's gate
	// has its own lock for the turns.
	mu        sync.Mutex
	resources map[string]*rwResource
}

// rwResource is one resource's state in an RWMemory.
type rwResource struct {
	gate     gate
	writer   uint64 // W; guarded by RWMemory.mu
	highest  uint64 // H; guarded by RWMemory.mu
	admitted bool   // an operation was admitted; guarded by RWMemory.mu
}

// NewRWMemory returns an empty RWMemory.
func NewRWMemory() *RWMemory { return &RWMemory{} }

// AdmitRead implements RWValidator. It waits while a write to the resource
// runs or waits ahead of it, and gives up with ctx's error if ctx ends
// first.
func (m *RWMemory) AdmitRead(ctx context.Context, name string, token uint64, read func(context.Context) error) error {
	return m.admit(ctx, name, token, false, read)
}

// AdmitWrite implements RWValidator. It waits while any operation on the
// resource runs or waits ahead of it, and gives up with ctx's error if ctx
// ends first.
func (m *RWMemory) AdmitWrite(ctx context.Context, name string, token uint64, write func(context.Context) error) error {
	return m.admit(ctx, name, token, true, write)
}

func (m *RWMemory) admit(ctx context.Context, name string, token uint64, write bool, op func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := m.resource(name)
	if err := r.gate.enter(ctx, write); err != nil {
		return err
	}
	defer r.gate.leave(write)
	// While a write is inside the gate nothing else is, so W and H hold
	// still; while a read is, only other reads raise H, which decides
	// nothing for a read.
	m.mu.Lock()
	bar := r.writer
	if write {
		bar = r.highest
	}
	m.mu.Unlock()
	if err := Check(name, token, bar); err != nil {
		return err
	}
	if err := op(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if write {
		r.writer = token
	}
	r.highest = max(r.highest, token)
	r.admitted = true
	return nil
}

// Tokens returns the resource's W (the highest token of an admitted write,
// 0 if none) and H (the highest token of any admitted operation), and false
// if no operation on it was admitted.
func (m *RWMemory) Tokens(name string) (writer, highest uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, found := m.resources[name]
	if !found {
		return 0, 0, false
	}
	return r.writer, r.highest, r.admitted
}

func (m *RWMemory) resource(name string) *rwResource {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.resources == nil {
		m.resources = make(map[string]*rwResource)
	}
	r, ok := m.resources[name]
	if !ok {
		r = &rwResource{}
		m.resources[name] = r
	}
	return r
}

// gate lets the reads of one resource in together and a write in alone, in
// arrival order: once a write waits, later reads wait behind it. A
// sync.RWMutex would do the turns, but a waiter could not give up when its
// context ends.
type gate struct {
	mu      sync.Mutex // guards the fields below
	readers int        // reads inside
	writing bool       // a write is inside
	queue   []*ticket  // waiters, in arrival order
}

// ticket is one waiter; ready is closed when it is let in.
type ticket struct {
	write bool
	ready chan struct{}
}

// enter waits until the operation may run, or ctx ends.
func (g *gate) enter(ctx context.Context, write bool) error {
	g.mu.Lock()
	if len(g.queue) == 0 && g.fits(write) {
		g.take(write)
		g.mu.Unlock()
		return nil
	}
	tk := &ticket{write: write, ready: make(chan struct{})}
	g.queue = append(g.queue, tk)
	g.mu.Unlock()
	select {
	case <-tk.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	select {
	case <-tk.ready: // let in meanwhile: give the turn back
		g.mu.Unlock()
		g.leave(write)
		return ctx.Err()
	default:
	}
	for i, q := range g.queue {
		if q == tk {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			break
		}
	}
	// A write that gave up at the head may have held back reads.
	g.letIn()
	g.mu.Unlock()
	return ctx.Err()
}

// leave ends an operation and lets in the waiters that now fit.
func (g *gate) leave(write bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if write {
		g.writing = false
	} else {
		g.readers--
	}
	g.letIn()
}

func (g *gate) fits(write bool) bool {
	if write {
		return !g.writing && g.readers == 0
	}
	return !g.writing
}

func (g *gate) take(write bool) {
	if write {
		g.writing = true
	} else {
		g.readers++
	}
}

// letIn lets in waiters from the head of the queue while they fit.
func (g *gate) letIn() {
	for len(g.queue) > 0 && g.fits(g.queue[0].write) {
		tk := g.queue[0]
		g.queue[0] = nil
		g.queue = g.queue[1:]
		g.take(tk.write)
		close(tk.ready)
	}
}
