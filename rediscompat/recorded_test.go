package rediscompat_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/redisdiff"
	"github.com/fencerlock/fencer/redisbridge/bridgetest"
	"github.com/stretchr/testify/require"
)

// The differential corpus, offline: every case of
// integration/testdata/redisdiff is sent to a one-node fencer in-process,
// and each reply compared with the one a real redis-server gave, recorded
// in testdata/replies (make redisdiff-record). No redis-server is needed;
// the live comparison is integration's TestRedisDiff*.

const corpus = "../integration/testdata/redisdiff"

var replies = filepath.Join("testdata", "replies")

func TestRecordedRedisReplies(t *testing.T) {
	cases, err := redisdiff.Load(corpus)
	require.NoError(t, err)
	n, err := bridgetest.Start(nil, nil)
	require.NoError(t, err)
	t.Cleanup(n.Close)
	waitForLeader(t, n.Addr)

	type recording struct {
		version string
		replies map[int][]byte
	}
	recs := map[string]recording{}
	for _, c := range cases {
		if _, ok := recs[c.File]; ok {
			continue
		}
		version, rs, err := redisdiff.ReadRecording(replies, c.File)
		require.NoError(t, err)
		major, err := redisdiff.Major(version)
		require.NoError(t, err)
		require.Equal(t, redisdiff.RecordedMajor, major, "%s: recorded from Redis %s", c.File, version)
		recs[c.File] = recording{version, rs}
	}

	steps, compared, listed := 0, 0, 0
	for _, c := range cases {
		rec := recs[c.File]
		for _, st := range c.Steps {
			if st.Replies() {
				steps++
				require.Contains(t, rec.replies, st.Line, "%s:%d has no recorded reply: run make redisdiff-record", c.File, st.Line)
			}
		}
		t.Run(c.File+"/"+c.Name, func(t *testing.T) {
			got, err := redisdiff.Play(c, n.Addr)
			require.NoError(t, err)
			res := redisdiff.Compare(c, rec.replies, got)
			for _, d := range res.Diffs {
				t.Errorf("%s (Redis %s recorded)", d, rec.version)
			}
			for _, note := range res.Notes {
				t.Log(note)
			}
			compared += res.Compared
			listed += res.Listed
		})
	}
	t.Logf("%d cases of %d files, %d recorded replies: %d equal, %d listed differences", len(cases), len(recs), steps, compared, listed)
	require.Equal(t, steps, compared+listed, "every recorded reply is compared or a listed difference")
}

// waitForLeader waits until the node at addr answers a write.
func waitForLeader(t *testing.T, addr string) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c := redisdiff.Case{File: "wait", Name: "leader", Steps: []redisdiff.Step{{Line: 1, Args: []string{"SET", "redisdiff:leader", "1", "PX", "1000"}}}}
		got, err := redisdiff.Play(c, addr)
		if err == nil && strings.HasPrefix(string(got[1]), "+OK") {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("no leader at %s: %v %q", addr, err, got[1])
		}
	}
}
