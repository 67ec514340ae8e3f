package fence

import (
	"context"
	"sync"
)

// Memory is a Validator for a store that lives in one process. It keeps the
// highest admitted token of every resource it has seen, in memory, and runs
// the writes to one resource one at a time; writes to different resources
// run in parallel. It is also the reference implementation of the rule,
// against which the other adapters are tested.
//
// What Memory remembers is lost with the process, so the store it guards
// must be lost with it too (or must keep the tokens itself, as fencesql and
// fenceredis do). It forgets nothing: one entry per resource ever written.
//
// The zero value is ready to use. A Memory must not be copied after first
// use.
type Memory struct {
	mu        sync.Mutex
	resources map[string]*resource
}

// resource is one resource's state in a Memory.
type resource struct {
	// turn is held (a value in it) while a write to the resource runs. A
	// channel rather than a mutex, so that a waiting Admit can give up
	// when its context ends.
	turn     chan struct{}
	highest  uint64 // guarded by Memory.mu
	admitted bool   // a write was admitted; guarded by Memory.mu
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{} }

// Admit implements Validator. A failed write (an error, or a panic) leaves
// the highest token as it was. A call waits while another write to the same
// resource runs, and gives up with ctx's error if ctx ends first.
func (m *Memory) Admit(ctx context.Context, name string, token uint64, write func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := m.resource(name)
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.turn }()
	m.mu.Lock()
	highest := r.highest
	m.mu.Unlock()
	if err := Check(name, token, highest); err != nil {
		return err
	}
	if err := write(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	r.highest, r.admitted = token, true
	m.mu.Unlock()
	return nil
}

// Highest returns the highest token admitted for the resource, and false if
// it never admitted a write.
func (m *Memory) Highest(name string) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.resources[name]
	if !ok {
		return 0, false
	}
	return r.highest, r.admitted
}

func (m *Memory) resource(name string) *resource {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.resources == nil {
		m.resources = make(map[string]*resource)
	}
	r, ok := m.resources[name]
	if !ok {
		r = &resource{turn: make(chan struct{}, 1)}
		m.resources[name] = r
	}
	return r
}
