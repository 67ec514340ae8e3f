// Command redsyncbench measures go-redsync/redsync's uncontended lock rate
// against one address (fencer, or Redis): each of -c clients locks and
// unlocks a key of its own (SET NX PX, then the release script by EVALSHA)
// for -d, after a warm-up, and the rate of lock/unlock pairs is printed as
// one line. docs/performance.md compares fencerd builds with it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7379", "RESP address")
	clients := flag.Int("c", 16, "clients, each with a key of its own")
	dur := flag.Duration("d", 5*time.Second, "measured time")
	warm := flag.Duration("warmup", time.Second, "time before the measurement")
	flag.Parse()
	rc := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 2 * *clients, DisableIdentity: true})
	defer rc.Close()
	rs := redsync.New(goredis.NewPool(rc))
	var pairs, errs atomic.Int64
	var measuring atomic.Bool
	start := time.Now()
	end := start.Add(*warm + *dur)
	time.AfterFunc(*warm, func() { measuring.Store(true) })
	var wg sync.WaitGroup
	for i := range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := rs.NewMutex(fmt.Sprintf("redsyncbench-%d", i), redsync.WithExpiry(10*time.Second), redsync.WithTries(1))
			for time.Now().Before(end) {
				err := m.LockContext(context.Background())
				if err == nil {
					var ok bool
					ok, err = m.UnlockContext(context.Background())
					if err == nil && !ok {
						err = fmt.Errorf("unlock answered false")
					}
				}
				switch {
				case !measuring.Load():
				case err != nil:
					errs.Add(1)
				default:
					pairs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("clients %d pairs/s %.0f errors %d\n", *clients, float64(pairs.Load())/dur.Seconds(), errs.Load())
	if errs.Load() > 0 {
		os.Exit(1)
	}
}
