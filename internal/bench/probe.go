package bench

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// ProbeResult is the JSON line of a probe, in peerbench's schema.
type ProbeResult struct {
	Probe  string  `json:"probe"`
	Detail string  `json:"detail"`
	N      int     `json:"n"`
	MeanUs float64 `json:"mean_us"`
	P50    int64   `json:"p50_us"`
	P99    int64   `json:"p99_us"`
	P999   int64   `json:"p999_us"`
	Max    int64   `json:"max_us"`
	Error  string  `json:"error,omitempty"`
}

func summarize(p ProbeResult, d Latencies) ProbeResult {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	d.Sort()
	p.N = len(d)
	if len(d) > 0 {
		p.MeanUs = round1(float64(sum.Microseconds()) / float64(len(d)))
	}
	p.P50, p.P99, p.P999, p.Max = d.Pct(0.5), d.Pct(0.99), d.Pct(0.999), d.Pct(1)
	return p
}

// ProbeFsync appends 4 KiB blocks to a fresh file in dir, each followed by
// fdatasync (a write-ahead log's commit), and reports the latency of each.
func ProbeFsync(dir string, n int) ProbeResult {
	p := ProbeResult{Probe: "fsync", Detail: "append 4KiB + fdatasync in " + dir + " (" + FSType(dir) + ")"}
	f, err := os.CreateTemp(dir, "fencer-bench-fsync-*")
	if err != nil {
		p.Error = err.Error()
		return p
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	d := make(Latencies, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			p.Error = err.Error()
			break
		}
		if err := fdatasync(f); err != nil {
			p.Error = err.Error()
			break
		}
		d = append(d, time.Since(t0))
	}
	return summarize(p, d)
}

// ProbeRTT measures round trips of 32 bytes over one loopback TCP
// connection.
func ProbeRTT(n int) ProbeResult {
	p := ProbeResult{Probe: "rtt", Detail: "loopback TCP 32B ping-pong, 1 connection"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.Error = err.Error()
		return p
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 32)
		for {
			if _, err := io.ReadFull(c, b); err != nil {
				return
			}
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		p.Error = err.Error()
		return p
	}
	defer c.Close()
	b := make([]byte, 32)
	d := make(Latencies, 0, n)
	for i := range n + 100 {
		t0 := time.Now()
		if _, err := c.Write(b); err != nil {
			p.Error = err.Error()
			break
		}
		if _, err := io.ReadFull(c, b); err != nil {
			p.Error = err.Error()
			break
		}
		if i >= 100 { // warm-up
			d = append(d, time.Since(t0))
		}
	}
	return summarize(p, d)
}

// FSType names the file system dir is on ("tmpfs" matters: fsync there
// costs nothing and the numbers mean nothing).
func FSType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	switch st.Type {
	case 0x01021994:
		return "tmpfs"
	case 0xEF53:
		return "ext2/3/4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x794c7630:
		return "overlayfs"
	}
	return "other"
}
