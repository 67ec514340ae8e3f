package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/fence"
)

// Readers hold a read-write lock together, each with its own token; the
// store admits their reads by the read-write rule, and a writer's token is
// above theirs.
func ExampleClient_NewRWMutex() {
	c, err := client.New(addrs)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	store := fence.NewRWMemory()
	rw := c.NewRWMutex("example-catalog", client.WithAutoRenew())

	r1, err := rw.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r2, err := rw.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	read := func(ctx context.Context) error { return nil }
	fmt.Println("readers together:", store.AdmitRead(ctx, "catalog", r2.Token(), read) == nil &&
		store.AdmitRead(ctx, "catalog", r1.Token(), read) == nil)

	_, err = rw.TryLock(ctx)
	fmt.Println("writer while reading:", errors.Is(err, client.ErrLocked))
	r1.Release(ctx)
	r2.Release(ctx)

	w, err := rw.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Release(ctx)
	fmt.Println("writer's token above the readers':", w.Token() > r1.Token() && w.Token() > r2.Token())
	// Output:
	// readers together: true
	// writer while reading: true
	// writer's token above the readers': true
}

// A semaphore's permits take the lowest free slots; the store fences each
// (resource, slot) pair with the plain rule.
func ExampleClient_NewSemaphore() {
	c, err := client.New(addrs)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	sem := c.NewSemaphore("example-gpu", 2)

	a, err := sem.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Release(ctx)
	b, err := sem.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Release(ctx)
	fmt.Println("slots:", a.Slot(), b.Slot())
	fmt.Println("second permit fenced as:", fence.SlotResource("gpu", b.Slot()))

	_, err = sem.TryAcquire(ctx)
	fmt.Println("a third permit:", errors.Is(err, client.ErrLocked))
	// Output:
	// slots: 0 1
	// second permit fenced as: gpu#slot=1
	// a third permit: true
}

// Several locks at once, all or nothing, with one token.
func ExampleClient_AcquireAll() {
	c, err := client.New(addrs)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	l, err := c.AcquireAll(ctx, []string{"example-account/42", "example-account/17"}, client.WithAutoRenew())
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	fmt.Println("holding:", l.Names())

	_, err = c.TryAcquire(ctx, "example-account/17")
	fmt.Println("one of them elsewhere:", errors.Is(err, client.ErrLocked))
	// Output:
	// holding: [example-account/42 example-account/17]
	// one of them elsewhere: true
}
