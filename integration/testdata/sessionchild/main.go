// Command sessionchild is the client process of the session and election
// tests in integration/session_test.go and election_test.go: the test
// kills it (SIGKILL) or pauses it (SIGSTOP) to end or stall its session's
// keepalives, which only a separate process can show.
//
// It prints one line per step on standard output for the test to follow.
//
// sessionchild hold -addrs A,B,C -ttl 1.5s -keys 200 -prefix k
//
//	opens a session, takes the locks PREFIX000..PREFIX199 under it and
//	prints
//	  session ID
//	  lock KEY OWNER TOKEN      (one line per lock)
//	  ready
//	then holds them until killed. If the session ends first it prints
//	  ended CAUSE
//	and exits 1.
//
// sessionchild campaign -addrs A,B,C -ttl 1.5s -election NAME -name N -store URL
//
//	opens a session, campaigns in the election with value N and prints
//	  campaigning SESSION
//	  elected EPOCH
//	then serves commands read from standard input, one a line:
//	  write   checks that it still leads and prints "checked EPOCH" (or
//	          "lost EPOCH" and nothing more), reads one more line (the gate:
//	          the test pauses the process before sending it) and PUTs
//	          "N@EPOCH" to URL with EPOCH as its fencing token, then prints
//	          "wrote EPOCH STATUS".
//	When its leadership ends it prints "deposed EPOCH CAUSE" (at any time).
//
// It exits 1 on any error it cannot go on from.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/fencerlock/fencer/fence/fencehttp"
)

var outMu sync.Mutex

// say prints one line; lines from several goroutines never interleave.
func say(format string, args ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Printf(format+"\n", args...)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sessionchild:", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: sessionchild hold|campaign [flags]"))
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	addrs := fs.String("addrs", "", "comma-separated fencerd RESP addresses")
	ttl := fs.Duration("ttl", 1500*time.Millisecond, "session TTL")
	keys := fs.Int("keys", 200, "hold: locks to take under the session")
	prefix := fs.String("prefix", "k", "hold: lock name prefix")
	election := fs.String("election", "leader", "campaign: election name")
	name := fs.String("name", "", "campaign: this campaigner's value")
	store := fs.String("store", "", "campaign: URL the leader PUTs to")
	_ = fs.Parse(os.Args[2:])

	c, err := client.New(strings.Split(*addrs, ","))
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s, err := c.NewSession(octx, client.WithSessionTTL(*ttl))
	cancel()
	if err != nil {
		fail(err)
	}
	switch mode {
	case "hold":
		hold(c, s, *keys, *prefix)
	case "campaign":
		campaign(c, s, *election, *name, *store)
	default:
		fail(fmt.Errorf("unknown mode %q", mode))
	}
}

// hold takes n locks under s, a few at a time, and holds them.
func hold(c *client.Client, s *client.Session, n int, prefix string) {
	say("session %d", s.ID())
	leases := make([]*client.Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			leases[i], errs[i] = c.TryAcquire(ctx, fmt.Sprintf("%s%03d", prefix, i), client.WithSession(s))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fail(err)
	}
	for _, l := range leases {
		say("lock %s %s %d", l.Name(), l.Owner(), l.Token())
	}
	say("ready")
	<-s.Done()
	say("ended %v", s.Err())
	os.Exit(1)
}

// campaign waits to be elected, then serves the test's write commands.
func campaign(c *client.Client, s *client.Session, name, value, store string) {
	e := c.NewElection(s, name)
	say("campaigning %d", s.ID())
	epoch, err := e.Campaign(context.Background(), value)
	if err != nil {
		fail(err)
	}
	say("elected %d", epoch)
	done := e.Done()
	go func() {
		<-done
		say("deposed %d %v", epoch, s.Err())
	}()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &fencehttp.Transport{
		Source: fencehttp.TokenFunc(func() uint64 { return epoch })}}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "write" {
			fail(fmt.Errorf("unknown command %q", in.Text()))
		}
		select {
		case <-done:
			say("lost %d", epoch)
			continue
		default:
		}
		say("checked %d", epoch)
		if !in.Scan() {
			return
		}
		req, err := http.NewRequest(http.MethodPut, store, strings.NewReader(fmt.Sprintf("%s@%d", value, epoch)))
		if err != nil {
			fail(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			fail(err)
		}
		resp.Body.Close()
		say("wrote %d %d", epoch, resp.StatusCode)
	}
}
