package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/fence"
)

// The safe pattern: every write carries the lease's fencing token, and the
// storage refuses a token lower than one it has already admitted. A holder
// that stalls past its lease (a GC pause, a stopped VM) cannot overwrite the
// work of the holder after it, even though it does not know it lost the
// lock.
func Example() {
	// addrs holds the cluster's client addresses, such as "127.0.0.1:7379".
	c, err := client.New(addrs)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// Storage that checks tokens; here the in-memory validator of package
	// fence, standing for a database.
	storage := fence.NewMemory()
	write := func(who string, token uint64) error {
		return storage.Admit(ctx, "report.csv", token, func(context.Context) error {
			fmt.Println(who, "writes report.csv")
			return nil
		})
	}

	// A first worker takes the lock, then stalls until its lease is gone.
	first, err := c.Acquire(ctx, "report", client.WithTTL(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	<-first.Done()

	// A second worker gets the lock and writes.
	second, err := c.Acquire(ctx, "report", client.WithAutoRenew())
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	if err := write("second worker", second.Token()); err != nil {
		log.Fatal(err)
	}

	// The first worker wakes up and writes with its old token: refused.
	err = write("first worker", first.Token())
	fmt.Println("stale write refused:", errors.Is(err, fence.ErrStaleToken))
	// Output:
	// second worker writes report.csv
	// stale write refused: true
}

// Hold a lock for as long as a job runs: the lease renews itself, and its
// context ends if the lease is lost, which stops the job.
func ExampleClient_Acquire() {
	c, err := client.New(addrs)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	lease, err := c.Acquire(ctx, "nightly-backup", client.WithTTL(10*time.Second), client.WithAutoRenew())
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.WithoutCancel(ctx))

	backup := func(ctx context.Context, token uint64) error {
		// Pass token along with every write to the backup target.
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
			return nil
		}
	}
	if err := backup(lease.Context(), lease.Token()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("backup done while holding the lock")
	// Output: backup done while holding the lock
}

// TryAcquire does not wait: a lock held by another owner is ErrLocked.
func ExampleClient_TryAcquire() {
	c, err := client.New(addrs)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	running, err := c.TryAcquire(ctx, "import")
	if err != nil {
		log.Fatal(err)
	}
	defer running.Release(ctx)

	_, err = c.TryAcquire(ctx, "import")
	if errors.Is(err, client.ErrLocked) {
		fmt.Println("an import is already running")
	}
	// Output: an import is already running
}

// A lease that is not renewed ends when its validity runs out, as the client
// counts it: its context is cancelled with ErrLeaseLost, before the server
// could give the lock to anyone else.
func ExampleLease_Context() {
	c, err := client.New(addrs)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	lease, err := c.TryAcquire(context.Background(), "short-job", client.WithTTL(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	<-lease.Context().Done()
	fmt.Println("lease lost:", errors.Is(context.Cause(lease.Context()), client.ErrLeaseLost))
	// Output: lease lost: true
}

// NewMutex has redsync's API, plus the fencing token.
func ExampleClient_NewMutex() {
	c, err := client.New(addrs)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	mutex := c.NewMutex("orders-export", client.WithExpiry(10*time.Second))
	if err := mutex.Lock(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked, token issued:", mutex.Token() > 0)
	if ok, err := mutex.Extend(); !ok || err != nil {
		log.Fatal("extend: ", err)
	}
	if ok, err := mutex.Unlock(); !ok || err != nil {
		log.Fatal("unlock: ", err)
	}
	fmt.Println("unlocked")
	// Output:
	// locked, token issued: true
	// unlocked
}

// Status shows who holds a lock and for how long yet.
func ExampleClient_Status() {
	c, err := client.New(addrs)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	lease, err := c.Acquire(ctx, "migrations")
	if err != nil {
		log.Fatal(err)
	}
	s, held, err := c.Status(ctx, "migrations")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(held, s.Owner == lease.Owner(), s.Token == lease.Token(), s.Remaining > 0)
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	_, held, _ = c.Status(ctx, "migrations")
	fmt.Println(held)
	// Output:
	// true true true true
	// false
}

// A leader election whose epoch fences the leader's writes: the leader
// that follows a deposed one has a higher epoch, and the storage refuses
// the deposed leader's late write.
func ExampleElection() {
	c, err := client.New(addrs)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	storage := fence.NewMemory()
	write := func(who string, epoch uint64) error {
		return storage.Admit(ctx, "primary", epoch, func(context.Context) error {
			fmt.Println(who, "writes as the leader")
			return nil
		})
	}

	// The first campaigner is elected and writes.
	s1, err := c.NewSession(ctx, client.WithSessionTTL(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	first := c.NewElection(s1, "example-election")
	epoch1, err := first.Campaign(ctx, "host-a")
	if err != nil {
		log.Fatal(err)
	}
	if err := write("host-a", epoch1); err != nil {
		log.Fatal(err)
	}

	// Its session ends (here it is closed; a pause or a crash ends it
	// after its TTL), and the next campaigner is elected.
	s2, err := c.NewSession(ctx, client.WithSessionTTL(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer s2.Close(ctx)
	second := c.NewElection(s2, "example-election")
	elected := make(chan uint64)
	go func() {
		epoch, err := second.Campaign(ctx, "host-b")
		if err != nil {
			log.Fatal(err)
		}
		elected <- epoch
	}()
	_ = s1.Close(ctx)
	epoch2 := <-elected
	leader, err := second.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", leader.Value, "with a higher epoch:", epoch2 > epoch1)
	if err := write("host-b", epoch2); err != nil {
		log.Fatal(err)
	}

	// The deposed leader's late write carries the old epoch: refused.
	err = write("host-a", epoch1)
	fmt.Println("deposed leader's write refused:", errors.Is(err, fence.ErrStaleToken))
	// Output:
	// host-a writes as the leader
	// leader: host-b with a higher epoch: true
	// host-b writes as the leader
	// deposed leader's write refused: true
}
