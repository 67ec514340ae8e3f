package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/testbin"
	"go.yaml.in/yaml/v3"
)

// alertRules is deploy/prometheus/fencer-alerts.yml as Prometheus reads it.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// The shipped alert rules are well formed, each names a section of
// docs/operations.md that exists, and every fencer series they use is
// exported by a real cluster's leader.
func TestAlertRulesUseSeriesTheNodesExport(t *testing.T) {
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy/prometheus/fencer-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("alert rules: %v", err)
	}
	ops, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string][]string{}
	seriesRe := regexp.MustCompile(`\bfencer_[a-z_]+\b`)
	anchorRe := regexp.MustCompile(`docs/operations\.md#([a-z0-9-]+)`)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("rule %+v lacks alert, expr, severity, summary or description", r)
			}
			if _, err := time.ParseDuration(r.For); err != nil && r.For != "0m" {
				t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
			}
			m := anchorRe.FindStringSubmatch(r.Annotations["description"])
			if m == nil || m[1] != strings.ToLower(r.Alert) {
				t.Errorf("%s: the description does not point to docs/operations.md#%s", r.Alert, strings.ToLower(r.Alert))
			} else if !regexp.MustCompile(`(?m)^#+ ` + r.Alert + `$`).Match(ops) {
				t.Errorf("%s: docs/operations.md has no heading %q", r.Alert, r.Alert)
			}
			for _, s := range seriesRe.FindAllString(r.Expr, -1) {
				used[s] = append(used[s], r.Alert)
			}
		}
	}
	if n < 5 {
		t.Fatalf("%d rules, want at least 5", n)
	}

	httpAddrs := map[*daemon]string{}
	c := startNodeClusterWith(t, 3, func(d *daemon) {
		httpAddrs[d] = net.JoinHostPort("127.0.0.1", freePorts(t, 1)[0])
		d.args = append(d.args, "--http-listen", httpAddrs[d])
	})
	leader := httpAddrs[c.nodes[c.leader(t)]]
	var body string
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + leader + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		// The member series appear once the leader has asked the others.
		if strings.Count(body, "fencer_member_healthy{") == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader never exported the member health of 3 members:\n%s", grepLines(body, "fencer_member"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	var missing []string
	for s, alerts := range used {
		if !strings.Contains(body, fmt.Sprintf("# TYPE %s ", s)) {
			missing = append(missing, fmt.Sprintf("%s (used by %v)", s, alerts))
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("series the alert rules use that the leader does not export: %v", missing)
	}
	t.Logf("%d rules; series used: %d, all exported", n, len(used))
}
