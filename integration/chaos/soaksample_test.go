//go:build linux

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The soak's sampling and plot. A sample is taken of whatever process a
// node runs at the time (faults kill and restart them; the restarts column
// counts the starts after the first), of its data directory even while it
// is down, and of nothing that is not there: a value that cannot be read
// (the node is down, or stopped by SIGSTOP and not answering) is left
// empty in the CSV and out of the fits.

// soakHTTPPort is where fencerd serves /metrics by default: the --listen
// port + 2.
const soakHTTPPort = "7381"

// sample is one node's figures at one time.
type sample struct {
	at       time.Duration // since the load started
	node     int
	pid      int // 0 if no process ran
	restarts int
	// NaN if not measured.
	rss, goroutines, fds, logBytes, logEntries, snapBytes float64
}

// sampler samples every node every interval and appends a row per node to
// a CSV file as it goes, so that a run that dies leaves its data.
type sampler struct {
	c     *cluster
	clk   clock
	every time.Duration
	web   *http.Client
	f     *os.File
	w     *bufio.Writer

	mu      sync.Mutex
	samples []sample
	werr    error
}

func newSampler(c *cluster, clk clock, every time.Duration, path string) (*sampler, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	timeout := min(2*time.Second, every/2)
	s := &sampler{c: c, clk: clk, every: every, f: f, w: bufio.NewWriter(f)}
	s.web = &http.Client{Timeout: timeout, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
			return c.nw.dial(addr, timeout)
		},
	}}
	s.w.WriteString("elapsed_s,node,pid,rss_bytes,goroutines,fds,log_bytes,log_entries,snapshot_bytes,restarts\n")
	return s, nil
}

// run samples at once and then every interval until stop is closed.
func (s *sampler) run(stop <-chan struct{}) {
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		s.round()
		select {
		case <-stop:
			s.close()
			return
		case <-tick.C:
		}
	}
}

// round samples every node at once.
func (s *sampler) round() {
	at := time.Duration(s.clk.now())
	row := make([]sample, len(s.c.nodes))
	var wg sync.WaitGroup
	for i, n := range s.c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row[i] = s.sampleNode(at, i, n)
		}()
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, row...)
	for _, r := range row {
		pid := ""
		if r.pid != 0 {
			pid = strconv.Itoa(r.pid)
		}
		fmt.Fprintf(s.w, "%.1f,%s,%s,%s,%s,%s,%s,%s,%s,%d\n", r.at.Seconds(), s.c.nodes[r.node].id, pid,
			csvNum(r.rss), csvNum(r.goroutines), csvNum(r.fds), csvNum(r.logBytes), csvNum(r.logEntries), csvNum(r.snapBytes), r.restarts)
	}
	if err := s.w.Flush(); err != nil && s.werr == nil {
		s.werr = err
	}
}

// csvNum renders a whole number, or nothing for NaN.
func csvNum(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func (s *sampler) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.w.Flush(); err != nil && s.werr == nil {
		s.werr = err
	}
	if err := s.f.Close(); err != nil && s.werr == nil {
		s.werr = err
	}
}

// err returns the first error writing the CSV.
func (s *sampler) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.werr
}

// all returns the samples so far.
func (s *sampler) all() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.samples...)
}

func (s *sampler) sampleNode(at time.Duration, i int, n *node) sample {
	nan := math.NaN()
	out := sample{at: at, node: i, rss: nan, goroutines: nan, fds: nan, logEntries: nan}
	n.mu.Lock()
	p := n.proc
	out.restarts = n.starts - 1
	n.mu.Unlock()
	if p != nil && !p.done() {
		out.pid = p.cmd.Process.Pid
		out.rss = vmRSS(out.pid)
		out.fds = openFDs(out.pid)
		out.goroutines, out.logEntries = s.scrape(n)
	}
	out.logBytes = diskBytes(filepath.Join(n.dataDir, "wal"))
	out.snapBytes = diskBytes(filepath.Join(n.dataDir, "snapshots"))
	return out
}

// vmRSS returns the resident set size of pid in bytes, or NaN.
func vmRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return math.NaN()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, found := strings.CutPrefix(line, "VmRSS:"); found {
			f := strings.Fields(rest) // "12345 kB"
			if kb, err := strconv.ParseFloat(f[0], 64); err == nil && len(f) == 2 && f[1] == "kB" {
				return kb * 1024
			}
		}
	}
	return math.NaN()
}

// openFDs returns how many file descriptors pid has open, or NaN.
func openFDs(pid int) float64 {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return math.NaN()
	}
	return float64(len(ents))
}

// scrape reads go_goroutines and fencer_log_entries (the Raft log entries
// the node keeps) from the node's /metrics; NaN for what it cannot read.
func (s *sampler) scrape(n *node) (goroutines, logEntries float64) {
	goroutines, logEntries = math.NaN(), math.NaN()
	resp, err := s.web.Get("http://" + net.JoinHostPort(n.ip, soakHTTPPort) + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return
	}
	for _, line := range bytes.Split(body, []byte("\n")) {
		for _, m := range []struct {
			prefix string
			v      *float64
		}{{"go_goroutines ", &goroutines}, {"fencer_log_entries ", &logEntries}} {
			if rest, found := bytes.CutPrefix(line, []byte(m.prefix)); found {
				if v, err := strconv.ParseFloat(string(bytes.TrimSpace(rest)), 64); err == nil {
					*m.v = v
				}
			}
		}
	}
	return
}

// diskBytes returns the size of the file at path, or of the files under
// it, as `du --apparent-size` counts; 0 if there is none. Files that vanish
// while it walks (a snapshot reaped, a segment deleted) are skipped.
func diskBytes(path string) float64 {
	var total int64
	_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			total += info.Size()
		}
		return nil
	})
	return float64(total)
}

// plotSamples draws the samples with gnuplot into path: a panel per metric
// and one for the restarts, a line per node, the fit over the second half
// dashed.
func plotSamples(samples []sample, fits []seriesFit, cfg soakConfig, path string) error {
	if _, err := exec.LookPath("gnuplot"); err != nil {
		return errors.New("gnuplot is not on PATH (Debian: apt-get install gnuplot-nox)")
	}
	var b strings.Builder
	half := (cfg.duration / 2).Minutes()
	fmt.Fprintf(&b, "set terminal pngcairo size 1600,1600 font ',10'\nset output '%s'\n", path)
	b.WriteString("set grid\nset key top left opaque\nset xlabel 'minutes'\nset samples 400\nset yrange [0:*]\n")
	for node := range soakNodes {
		fmt.Fprintf(&b, "$n%d << EOD\n", node+1)
		for _, s := range samples {
			if s.node != node {
				continue
			}
			fmt.Fprintf(&b, "%.3f", s.at.Minutes())
			for _, m := range soakMetrics {
				fmt.Fprintf(&b, " %g", m.value(s)/m.scale)
			}
			fmt.Fprintf(&b, " %d\n", s.restarts)
		}
		b.WriteString("EOD\n")
	}
	fmt.Fprintf(&b, "set multiplot layout 4,2 title \"fencer soak: %d nodes, %v, a fault every %v, a sample every %v; dashed: the fit over the second half\"\n",
		soakNodes, cfg.duration, cfg.faultEvery(), cfg.sample)
	fmt.Fprintf(&b, "set arrow 1 from first %g, graph 0 to first %g, graph 1 nohead dt 3 lc 'gray40'\n", half, half)
	colors := []string{"#1f77b4", "#d62728", "#2ca02c"}
	for col, m := range soakMetrics {
		title := m.name
		if m.unit != "" {
			title += " (" + m.unit + ")"
		}
		fmt.Fprintf(&b, "set title '%s'\nplot ", title)
		var parts []string
		for node := range soakNodes {
			parts = append(parts, fmt.Sprintf("$n%d using 1:%d with lines lw 1.5 lc rgb '%s' title 'n%d'", node+1, col+2, colors[node], node+1))
		}
		for _, f := range fits {
			if f.m.name != m.name || f.g.samples < minFitSamples {
				continue
			}
			node, _ := strconv.Atoi(strings.TrimPrefix(f.node, "n"))
			// y = mean + slope·(t − mean t), in the panel's unit.
			parts = append(parts, fmt.Sprintf("(x >= %g ? (%g + %g*(x/60.0 - %g))/%g : 1/0) with lines dt 2 lw 1 lc rgb '%s' notitle",
				half, f.g.mean, f.g.perHour, f.g.tMean, m.scale, colors[node-1]))
		}
		b.WriteString(strings.Join(parts, ", \\\n  ") + "\n")
	}
	b.WriteString("set title 'restarts (cumulative)'\n")
	most := 0
	for _, s := range samples {
		most = max(most, s.restarts)
	}
	if most <= 10 {
		b.WriteString("set ytics 1\n")
	}
	b.WriteString("plot ")
	var parts []string
	for node := range soakNodes {
		parts = append(parts, fmt.Sprintf("$n%d using 1:%d with steps lw 1.5 lc rgb '%s' title 'n%d'", node+1, len(soakMetrics)+2, colors[node], node+1))
	}
	b.WriteString(strings.Join(parts, ", ") + "\nunset multiplot\n")
	cmd := exec.Command("gnuplot")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gnuplot: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}
