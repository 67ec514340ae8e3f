package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The leader is removed from the cluster: by FENCE.REMOVE of its own ID
// sent to it, or after FENCE.TRANSFER moved leadership away first. The
// others elect a leader and keep every lock and its token; the removed node
// stops serving (it answers NOLEADER ... not a member, as docs/operations.md
// says) and, wiped and started again with --join, is a member again.
func TestClusterRemoveLeaderItself(t *testing.T) {
	for _, transferFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "remove", true: "transfer then remove"}[transferFirst], func(t *testing.T) {
			c := startNodeCluster(t, 3)
			l := c.leader(t)
			held := c.mustGrant(t, l, clusterRetryWithin, "held", "a", longTTL)
			via := l
			if transferFirst {
				to := c.others(l)[0]
				c.transfer(t, l, to)
				via = to
			}
			removed := time.Now()
			c.remove(t, via, l)
			rest := c.others(l)
			newL := c.agreedLeader(t, rest, clusterElectionTimeout)
			t.Logf("removed node %d (leader: %v); node %d leads, seen %v after the remove",
				l+1, !transferFirst, newL+1, time.Since(removed).Round(time.Millisecond))
			c.awaitMembers(t, rest, rest, clusterReadyTimeout)

			for _, i := range rest {
				s, ok := c.statusOf(t, i, clusterRetryWithin, "held")
				require.True(t, ok, "node %d: the lock survives its leader's removal", i+1)
				assert.Equal(t, held.token, s.token)
			}
			after := c.mustGrant(t, rest[1], clusterRetryWithin, "after", "b", time.Minute)
			assert.Greater(t, after.token, held.token)

			// The removed node serves no more: it knows it is not a member.
			var last any
			require.Eventually(t, func() bool {
				last, _ = clusterCall(c.nodes[l].addr, requestTimeout, "FENCE.ACQUIRE", "x", "c", "60000")
				e, isErr := last.(respError)
				return isErr && strings.HasPrefix(string(e), "NOLEADER") && strings.Contains(string(e), "not a member")
			}, 15*time.Second, 100*time.Millisecond, "the removed node still answers %v", last)

			// Replaced as docs/operations.md says: a new data dir and --join,
			// under its old ID.
			d := c.nodes[l]
			d.kill9(t)
			require.NoError(t, os.RemoveAll(d.dataDir), "its disk is replaced")
			d.args = append(d.args, "--id", c.ids[l], "--join", c.nodes[rest[0]].addr)
			d.restart(t)
			c.awaitMembers(t, c.all(), c.all(), clusterReadyTimeout)
			s, ok := c.statusOf(t, l, clusterRetryWithin, "after")
			require.True(t, ok, "the node that joined again has the cluster's locks")
			assert.Equal(t, after.token, s.token)
			g := c.mustGrant(t, l, clusterRetryWithin, fmt.Sprintf("via-%d", l), "d", time.Minute)
			assert.Greater(t, g.token, after.token)
		})
	}
}
