package integration

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// httpGet returns the status and body of GET url, or status 0 if nothing
// answered within a second.
func httpGet(url string) (int, string) {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// A node that is to join a cluster whose members do not answer yet waits
// for them, and meanwhile its liveness probe answers (a Kubernetes liveness
// probe would otherwise restart a node that is only waiting) and its
// readiness probe says it is not ready, with the reason.
func TestHealthzAnswersWhileJoining(t *testing.T) {
	ports := freePorts(t, 2)
	seed := net.JoinHostPort("127.0.0.1", ports[0]) // nothing listens there
	d := newDaemons(t, 1)[0]
	httpAddr := net.JoinHostPort("127.0.0.1", ports[1])
	d.args = append(d.args, "--join", seed, "--http-listen", httpAddr)
	d.ready = func(*daemon) error { return nil } // RESP is not served before it joins
	d.start(t)
	deadline := time.Now().Add(5 * time.Second)
	var code int
	var body string
	for time.Now().Before(deadline) {
		if code, body = httpGet("http://" + httpAddr + "/healthz"); code != 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != http.StatusOK {
		t.Fatalf("/healthz while waiting for the seed: %d %q, want 200", code, body)
	}
	if code, body = httpGet("http://" + httpAddr + "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready") {
		t.Fatalf("/readyz while waiting for the seed: %d %q, want 503 not ready", code, body)
	}
	t.Logf("/readyz: %s", body)
}
