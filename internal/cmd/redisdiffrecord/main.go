// Command redisdiffrecord records a real redis-server's replies to the
// differential corpus (integration/testdata/redisdiff) as test data
// (rediscompat/testdata/replies), which go test ./rediscompat compares
// fencer's replies with, offline. make redisdiff-record runs it.
//
// It starts its own redis-server (from PATH, or -redis-server), saving
// nothing, and refuses one whose major version is not the one the replies
// are recorded from (redisdiff.RecordedMajor).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/internal/redisdiff"
	"github.com/fencerlock/fencer/internal/resp"
)

func main() {
	bin := flag.String("redis-server", "redis-server", "the redis-server to record")
	cases := flag.String("cases", "integration/testdata/redisdiff", "the corpus: cases/ and scripts/")
	out := flag.String("out", "rediscompat/testdata/replies", "where the replies go")
	flag.Parse()
	if err := run(*bin, *cases, *out); err != nil {
		fmt.Fprintln(os.Stderr, "redisdiffrecord:", err)
		os.Exit(1)
	}
}

func run(bin, casesDir, out string) error {
	cs, err := redisdiff.Load(casesDir)
	if err != nil {
		return err
	}
	addr, stop, err := startRedis(bin)
	if err != nil {
		return err
	}
	defer stop()
	version, err := redisVersion(addr)
	if err != nil {
		return err
	}
	if err := redisdiff.CheckRecordable(version); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	byFile := map[string]redisdiff.Recording{}
	steps := 0
	for _, c := range cs {
		replies, err := redisdiff.Play(c, addr)
		if err != nil {
			return err
		}
		rec, ok := byFile[c.File]
		if !ok {
			rec = redisdiff.Recording{RedisVersion: version, Replies: map[string]map[int][]byte{}}
			byFile[c.File] = rec
		}
		rec.Replies[c.Name] = replies
		steps += len(replies)
	}
	old, _ := filepath.Glob(filepath.Join(out, "*.replies"))
	for _, f := range old {
		if _, ok := byFile[strings.TrimSuffix(filepath.Base(f), ".replies")+".cases"]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for file, rec := range byFile {
		if err := redisdiff.Record(out, file, rec); err != nil {
			return err
		}
	}
	fmt.Printf("recorded Redis %s's %d replies to %d cases of %d files in %s\n", version, steps, len(cs), len(byFile), out)
	return nil
}

// startRedis starts redis-server on a free loopback port, saving nothing.
func startRedis(bin string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	dir, err := os.MkdirTemp("", "redisdiffrecord-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return addr, stop, nil
		}
		if time.Now().After(end) {
			stop()
			return "", nil, fmt.Errorf("redis-server did not listen on %s", addr)
		}
	}
}

// redisVersion is INFO server's redis_version.
func redisVersion(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(resp.Command("INFO", "server")); err != nil {
		return "", err
	}
	v, err := resp.ReadValue(bufio.NewReader(c))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(v.Str, "\r\n") {
		if s, ok := strings.CutPrefix(l, "redis_version:"); ok {
			if _, err := redisdiff.Major(s); err != nil {
				return "", fmt.Errorf("redis_version %q: %w", s, strconv.ErrSyntax)
			}
			return s, nil
		}
	}
	return "", fmt.Errorf("INFO server has no redis_version")
}
