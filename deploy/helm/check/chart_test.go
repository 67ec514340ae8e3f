// Package check renders the Helm chart deploy/helm/fencer with helm's own
// packages (no helm binary, no Kubernetes cluster) under several value
// sets, lints it, and decodes every object strictly into the Kubernetes API
// types: a field those types do not have fails. It is a Go module of its
// own so that fencer's module takes no Kubernetes dependency.
package check

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir  = "../fencer"
	namespace = "locks"
)

// objects is one rendering, decoded.
type objects struct {
	names        []string // kind/name of every object, in file order
	statefulSets []appsv1.StatefulSet
	services     []corev1.Service
	pdbs         []policyv1.PodDisruptionBudget
	policies     []networkingv1.NetworkPolicy
	monitors     []serviceMonitor
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// the chart sets (its Go types are not in k8s.io/api): decoded strictly
// too, so a field the chart sets and this does not name fails.
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// render renders the chart with vals and returns its manifests by file.
func render(t *testing.T, vals map[string]any) map[string]string {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "fencer", Namespace: namespace, Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return out
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decodeAll decodes every manifest strictly.
func decodeAll(manifests map[string]string) (objects, error) {
	var o objects
	files := make([]string, 0, len(manifests))
	for f := range manifests {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		if strings.HasSuffix(f, "NOTES.txt") {
			continue
		}
		for _, doc := range docSep.Split(manifests[f], -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			if err := o.decode([]byte(doc)); err != nil {
				return o, fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	return o, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// decode decodes one object strictly into its kind's type.
func (o *objects) decode(doc []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	strict := func(v any) error { return yaml.UnmarshalStrict(doc, v) }
	var err error
	switch head.APIVersion + " " + head.Kind {
	case "apps/v1 StatefulSet":
		var v appsv1.StatefulSet
		err = strict(&v)
		o.statefulSets = append(o.statefulSets, v)
	case "v1 Service":
		var v corev1.Service
		err = strict(&v)
		o.services = append(o.services, v)
	case "policy/v1 PodDisruptionBudget":
		var v policyv1.PodDisruptionBudget
		err = strict(&v)
		o.pdbs = append(o.pdbs, v)
	case "networking.k8s.io/v1 NetworkPolicy":
		var v networkingv1.NetworkPolicy
		err = strict(&v)
		o.policies = append(o.policies, v)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		var v serviceMonitor
		err = strict(&v)
		o.monitors = append(o.monitors, v)
	default:
		return fmt.Errorf("an object of a kind this check does not know: %s %s", head.APIVersion, head.Kind)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", head.Kind, head.Metadata.Name, err)
	}
	o.names = append(o.names, head.Kind+"/"+head.Metadata.Name)
	return nil
}

// valueSets are the values the chart is checked with.
var valueSets = map[string]map[string]any{
	"defaults": {},
	"password and TLS": {
		"auth": map[string]any{"passwordSecret": "fencer-pass"},
		"tls":  map[string]any{"secret": "fencer-tls"},
	},
	"users file, five, monitored, no policy, no budget": {
		"replicas":            5,
		"auth":                map[string]any{"usersSecret": "fencer-users"},
		"serviceMonitor":      map[string]any{"enabled": true},
		"networkPolicy":       map[string]any{"enabled": false},
		"podDisruptionBudget": map[string]any{"enabled": false},
		"extraArgs":           []any{"--max-locks=1000"},
	},
}

func TestChartLints(t *testing.T) {
	for name, vals := range valueSets {
		l := lint.All(chartDir, vals, namespace, false)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: %s", name, m)
			}
		}
	}
}

func TestChartRendersStrictly(t *testing.T) {
	containerUser := containerfileUser(t)
	for name, vals := range valueSets {
		t.Run(name, func(t *testing.T) {
			o, err := decodeAll(render(t, vals))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("objects: %v", o.names)
			replicas := 3
			if r, ok := vals["replicas"].(int); ok {
				replicas = r
			}
			checkStatefulSet(t, o, vals, replicas, containerUser)
			checkServices(t, o)
			if pe, _ := vals["podDisruptionBudget"].(map[string]any); pe == nil {
				if len(o.pdbs) != 1 || o.pdbs[0].Spec.MinAvailable == nil || o.pdbs[0].Spec.MinAvailable.IntValue() != replicas/2+1 {
					t.Fatalf("PodDisruptionBudgets %+v: want one keeping a majority of %d", o.pdbs, replicas)
				}
			} else if len(o.pdbs) != 0 {
				t.Fatal("a PodDisruptionBudget though it was disabled")
			}
			if ne, _ := vals["networkPolicy"].(map[string]any); ne == nil {
				checkNetworkPolicy(t, o)
			} else if len(o.policies) != 0 {
				t.Fatal("a NetworkPolicy though it was disabled")
			}
		})
	}
}

// containerfileUser returns the Containerfile's numeric USER.
func containerfileUser(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../../Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USER (\d+):\d+$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the Containerfile has no numeric USER")
	}
	return string(m[1])
}

func checkStatefulSet(t *testing.T, o objects, vals map[string]any, replicas int, user string) {
	t.Helper()
	if len(o.statefulSets) != 1 {
		t.Fatalf("%d StatefulSets", len(o.statefulSets))
	}
	s := o.statefulSets[0]
	if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q, want Parallel", s.Spec.PodManagementPolicy)
	}
	if s.Spec.Replicas == nil || int(*s.Spec.Replicas) != replicas {
		t.Errorf("replicas %v, want %d", s.Spec.Replicas, replicas)
	}
	pod := s.Spec.Template.Spec
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || fmt.Sprint(*sc.RunAsUser) != user {
		t.Errorf("pod security context %+v: want non-root, user %s (the Containerfile's)", pod.SecurityContext, user)
	}
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		t.Error("no pod anti-affinity")
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < 10 {
		t.Errorf("termination grace %v: want time for the leadership transfer", pod.TerminationGracePeriodSeconds)
	}
	c := pod.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the root filesystem is not read-only")
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v: want GET /healthz", p)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v: want GET /readyz", p)
	}
	if !slices.Contains(c.Args, fmt.Sprintf("--bootstrap-expect=%d", replicas)) {
		t.Errorf("args %v: want --bootstrap-expect=%d", c.Args, replicas)
	}
	join := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--join="); ok {
			join = v
		}
	}
	if got := len(strings.Split(join, ",")); join == "" || got != replicas {
		t.Errorf("--join=%s names %d servers, want %d", join, got, replicas)
	}
	_, tls := vals["tls"]
	if slices.Contains(c.Args, "--raft-tls") != tls {
		t.Errorf("args %v: --raft-tls must be given exactly when a TLS Secret is", c.Args)
	}
}

func checkServices(t *testing.T, o objects) {
	t.Helper()
	headless := 0
	for _, s := range o.services {
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			headless++
			if !s.Spec.PublishNotReadyAddresses {
				t.Errorf("headless Service %s does not publish not-ready addresses: peers could not resolve each other before they are ready", s.Name)
			}
			if s.Name != o.statefulSets[0].Spec.ServiceName {
				t.Errorf("headless Service %s is not the StatefulSet's serviceName %s", s.Name, o.statefulSets[0].Spec.ServiceName)
			}
		}
	}
	if headless != 1 || len(o.services) != 2 {
		t.Errorf("%d Services, %d headless: want a headless one and a client one", len(o.services), headless)
	}
}

// checkNetworkPolicy: Raft's port is reachable from the StatefulSet's own
// pods only.
func checkNetworkPolicy(t *testing.T, o objects) {
	t.Helper()
	if len(o.policies) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1", len(o.policies))
	}
	own := o.statefulSets[0].Spec.Selector.MatchLabels
	raftPort := int32(0)
	for _, p := range o.statefulSets[0].Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "raft" {
			raftPort = p.ContainerPort
		}
	}
	p := o.policies[0]
	if !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || fmt.Sprint(p.Spec.PodSelector.MatchLabels) != fmt.Sprint(own) {
		t.Fatalf("NetworkPolicy %+v does not govern the StatefulSet's pods' ingress", p.Spec)
	}
	opens := 0
	for _, rule := range p.Spec.Ingress {
		for _, port := range rule.Ports {
			if port.Port == nil || port.Port.IntValue() != int(raftPort) {
				continue
			}
			opens++
			if len(rule.From) != 1 || rule.From[0].PodSelector == nil || rule.From[0].NamespaceSelector != nil || rule.From[0].IPBlock != nil ||
				fmt.Sprint(rule.From[0].PodSelector.MatchLabels) != fmt.Sprint(own) {
				t.Errorf("a rule opens the Raft port %d to %+v, not only the StatefulSet's pods", raftPort, rule.From)
			}
		}
		if len(rule.Ports) == 0 {
			t.Errorf("a rule opens every port to %+v", rule.From)
		}
	}
	if opens != 1 {
		t.Errorf("the Raft port is opened by %d rules, want 1", opens)
	}
}

// The strict decoding does catch a field the API types do not have.
func TestStrictDecodeRefusesUnknownField(t *testing.T) {
	manifests := render(t, nil)
	for f, m := range manifests {
		if strings.HasSuffix(f, "statefulset.yaml") {
			manifests[f] = strings.Replace(m, "  podManagementPolicy: Parallel", "  podManagementPolicy: Parallel\n  podManagmentPolicy: Parallel", 1)
		}
	}
	_, err := decodeAll(manifests)
	if err == nil || !strings.Contains(err.Error(), "podManagmentPolicy") {
		t.Fatalf("a misspelt field decoded without error (%v)", err)
	}
	t.Logf("refused as it should be: %v", err)
}
