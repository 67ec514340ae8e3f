package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fencerlock/fencer/fsm"
	"github.com/fencerlock/fencer/internal/atomicfile"
	"github.com/prometheus/client_golang/prometheus"
)

// A cluster's identity. The first leader of a new cluster (or of one made
// before IDs, when it first runs a version with them; or of a cluster
// seeded from another's snapshot) commits a random ID (fsm.OpClusterID:
// only the first one committed counts, so nodes that bootstrap together
// still agree on one). It is replicated state, kept in snapshots. Each node
// also keeps the ID it belongs to in its data directory (clusterIDFile), so
// that before Raft starts a restarted node can check that the cluster its
// --join addresses name is its own (Config.CheckCluster): a node that once
// bootstrapped a cluster of its own, restarted with --join to another, is
// refused instead of running beside it as a second cluster.

// clusterIDFile holds, in the data directory, the ID of the cluster the
// node belongs to, once it has applied it.
const clusterIDFile = "cluster-id"

// newClusterID returns a new random cluster ID: 16 bytes in hex.
func newClusterID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("server: making a cluster ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// ClusterID returns the ID of the cluster this node belongs to, as it has
// applied it, or "" before one was committed.
func (n *Node) ClusterID() string { return n.table.ClusterID() }

// readClusterID returns the cluster ID recorded in dir, or "" if none is.
func readClusterID(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, clusterIDFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("server: reading the cluster ID: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// identity records the cluster ID the node applied in its data directory.
// It is used on the FSM goroutine only.
type identity struct {
	dir      string
	recorded string // what the file holds
	onError  func(error)
}

// record keeps id in the data directory unless it is there already.
func (i *identity) record(id string) {
	if id == "" || id == i.recorded || i.dir == "" {
		return
	}
	if err := atomicfile.Write(filepath.Join(i.dir, clusterIDFile), []byte(id+"\n"), 0o600); err != nil {
		i.onError(err)
		return
	}
	i.recorded = id
}

// commitClusterID commits a new cluster ID if the table has none. A new
// leader calls it after its Barrier and before it is ready, so that the ID
// is committed before any request this leader serves (and no entry of its
// own comes between a client's). Only the first ID committed counts. If
// the commit fails (leadership lost), the next leader tries.
func (n *Node) commitClusterID() {
	if n.table.ClusterID() != "" || faultPoint(pointProposeClusterID, nil) {
		// (A test skips it, as a version from before IDs did.)
		return
	}
	id, err := newClusterID()
	if err != nil {
		n.log.Warn("no cluster ID proposed", "err", err)
		return
	}
	c := fsm.Command{Op: fsm.OpClusterID, Key: id}
	if err := n.raft.Apply(c.Encode(nil), 0).Error(); err != nil {
		n.log.Warn("could not commit a cluster ID; the next leader will", "err", err)
		return
	}
	n.log.Info("naming the cluster", "cluster_id", n.table.ClusterID())
}

// clusterInfo is fencer_cluster_info: always 1 once the node knows its
// cluster's ID, which is its label.
type clusterInfo struct {
	n    *Node
	desc *prometheus.Desc
}

func newClusterInfo(n *Node) *clusterInfo {
	return &clusterInfo{n: n, desc: prometheus.NewDesc("fencer_cluster_info",
		"Always 1 once the node has applied its cluster's ID; the label is the ID.", []string{"cluster_id"}, nil)}
}

func (c *clusterInfo) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *clusterInfo) Collect(ch chan<- prometheus.Metric) {
	if id := c.n.ClusterID(); id != "" {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, id)
	}
}
