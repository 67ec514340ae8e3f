// Command lockclient is the client process of the fencing scenario in
// integration/fencing_*_test.go (Kleppmann, "How to do distributed
// locking"): it takes a lock, checks that its lease is valid, and writes to
// a store. The test pauses it with SIGSTOP between the check and the write,
// past its lease, so that the write arrives after another client's.
//
// The lock is fencer's (FENCE.ACQUIRE, which returns a fencing token that
// the write carries) or a Redlock taken with redsync on several independent
// Redis servers (no token). The store is HTTP (PUT, with a Fencing-Token
// header when there is a token) or Redis through fence/fenceredis.
//
// It prints what it does, one line per step, for the test to follow:
//
//	acquired lock "report": token 27, lease 4s
//	lease valid for 3.99s more; writing
//	writing "..." with token 27
//	store answered: 409 Conflict: fence: stale token 27 for "/report": token 30 was already admitted
//
// With -gate it reads one line from standard input between the lease check
// and the write. The test sends that line right after its SIGSTOP, so the
// pause lands exactly between the check and the write, where a GC pause does
// the damage; a process that is not paused gets the line within
// milliseconds, long before its lease ends.
//
// It exits 0 once the store has answered, whatever the answer, and 1 if it
// could not take the lock or reach the store.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/fencerlock/fencer/fence"
	"github.com/fencerlock/fencer/fence/fencehttp"
	"github.com/fencerlock/fencer/fence/fenceredis"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// driftFactor is the share of a lease the client gives up to clock drift
// when it computes how long its lease is valid (redsync's default too).
const driftFactor = 0.01

type options struct {
	lock, fencerAddr, redisAddrs, key, owner, store, value string
	ttl                                                    time.Duration
	gate                                                   bool
}

func main() {
	var o options
	flag.StringVar(&o.lock, "lock", "fencer", "lock service: fencer (with a fencing token) or redlock (redsync, no token)")
	flag.StringVar(&o.fencerAddr, "fencer", "127.0.0.1:7379", "fencerd RESP address, for -lock fencer")
	flag.StringVar(&o.redisAddrs, "redis", "", "comma-separated redis-server addresses, for -lock redlock")
	flag.StringVar(&o.key, "key", "report", "lock name")
	flag.StringVar(&o.owner, "owner", "client-1", "owner name sent to fencer")
	flag.DurationVar(&o.ttl, "ttl", 4*time.Second, "lease TTL")
	flag.StringVar(&o.store, "store", "", "where to write: http://host:port/path (PUT) or redis://host:port/key (fenced SET)")
	flag.StringVar(&o.value, "value", "written by client 1", "what to write")
	flag.BoolVar(&o.gate, "gate", false, "read a line from stdin between the lease check and the write")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "lockclient:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		token    uint64
		hasToken bool
		until    time.Time
		err      error
	)
	switch o.lock {
	case "fencer":
		token, until, err = acquireFencer(ctx, o)
		hasToken = true
	case "redlock":
		until, err = acquireRedlock(ctx, o)
	default:
		return fmt.Errorf("-lock %q: want fencer or redlock", o.lock)
	}
	if err != nil {
		return err
	}
	// The check a careful client makes before it writes.
	left := time.Until(until)
	if left <= 0 {
		return fmt.Errorf("lease ended before the write (%v ago); not writing", -left)
	}
	say("lease valid for %.2fs more; writing", left.Seconds())
	if o.gate {
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return fmt.Errorf("reading the gate line: %w", err)
		}
	}
	if hasToken {
		say("writing %q with token %d", o.value, token)
	} else {
		say("writing %q (no token to send)", o.value)
	}
	answer, err := write(ctx, o, token, hasToken)
	if err != nil {
		return err
	}
	say("store answered: %s", answer)
	return nil
}

// acquireFencer takes the lock with FENCE.ACQUIRE and returns its token and
// the end of its lease as the client reckons it: from just before the
// request was sent, less the drift allowance.
func acquireFencer(ctx context.Context, o options) (uint64, time.Time, error) {
	c := redis.NewClient(&redis.Options{Addr: o.fencerAddr, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	defer c.Close()
	start := time.Now()
	reply, err := c.Do(ctx, "FENCE.ACQUIRE", o.key, o.owner, o.ttl.Milliseconds()).Slice()
	if errors.Is(err, redis.Nil) {
		return 0, time.Time{}, fmt.Errorf("lock %q is held by someone else", o.key)
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("FENCE.ACQUIRE: %w", err)
	}
	token, ok1 := reply[0].(int64)
	ttlMS, ok2 := reply[1].(int64)
	if len(reply) != 2 || !ok1 || !ok2 {
		return 0, time.Time{}, fmt.Errorf("FENCE.ACQUIRE answered %v", reply)
	}
	ttl := time.Duration(ttlMS) * time.Millisecond
	say("acquired lock %q: token %d, lease %v", o.key, token, ttl)
	return uint64(token), start.Add(ttl - time.Duration(float64(ttl)*driftFactor)), nil
}

// acquireRedlock takes the lock with redsync on every -redis server
// (Redlock: a majority must grant it) and returns the end of its lease.
func acquireRedlock(ctx context.Context, o options) (time.Time, error) {
	addrs := strings.Split(o.redisAddrs, ",")
	var pools []redsyncredis.Pool
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		defer c.Close()
		pools = append(pools, goredis.NewPool(c))
	}
	m := redsync.New(pools...).NewMutex(o.key, redsync.WithExpiry(o.ttl), redsync.WithTries(1))
	if err := m.LockContext(ctx); err != nil {
		return time.Time{}, fmt.Errorf("redsync lock: %w", err)
	}
	say("acquired lock %q with redsync on %d Redis servers: no token, lease %v", o.key, len(addrs), o.ttl)
	return m.Until(), nil
}

// write writes o.value to the store and returns its answer.
func write(ctx context.Context, o options, token uint64, hasToken bool) (string, error) {
	u, err := url.Parse(o.store)
	if err != nil {
		return "", fmt.Errorf("-store: %w", err)
	}
	switch u.Scheme {
	case "http":
		hc := &http.Client{Timeout: 30 * time.Second}
		if hasToken {
			hc.Transport = &fencehttp.Transport{Source: fencehttp.TokenFunc(func() uint64 { return token })}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, o.store, strings.NewReader(o.value))
		if err != nil {
			return "", err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", fmt.Errorf("writing to the store: %w", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		answer := resp.Status
		if b := strings.TrimSpace(string(body)); b != "" {
			answer += ": " + b
		}
		return answer, nil
	case "redis":
		if !hasToken {
			return "", errors.New("a redis:// store is fenced and needs a token (-lock fencer)")
		}
		c := redis.NewClient(&redis.Options{Addr: u.Host})
		defer c.Close()
		err := fenceredis.New(c).Set(ctx, strings.TrimPrefix(u.Path, "/"), token, o.value, 0)
		if err == nil {
			return "OK", nil
		}
		if errors.Is(err, fence.ErrStaleToken) {
			return "refused: " + err.Error(), nil
		}
		return "", fmt.Errorf("writing to the store: %w", err)
	default:
		return "", fmt.Errorf("-store %q: want an http:// or redis:// URL", o.store)
	}
}
