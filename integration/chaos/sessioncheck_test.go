//go:build linux

package chaos

import (
	"errors"
	"testing"

	"github.com/fencerlock/fencer/fence"
)

// Tests of the sessions' and the election's checkers on small made-up
// histories, as checker_test.go tests the others: each must accept a
// correct history and reject the violations it exists for.

func TestSessionCheck(t *testing.T) {
	g := func(call int64, probe bool) sessionGrant {
		return sessionGrant{g: grant{key: "sreg-0", owner: "o", token: uint64(call), call: call, ret: call + 5}, probe: probe}
	}
	tests := []struct {
		name string
		s    *sessionRecord
		bad  int
	}{
		{"granted before the end", &sessionRecord{id: 7, ended: 100, grants: []sessionGrant{g(10, false), g(99, false)}}, 0},
		{"never seen ended", &sessionRecord{id: 7, grants: []sessionGrant{g(10, false), g(500, false)}}, 0},
		{"probe granted after the end", &sessionRecord{id: 7, ended: 100, grants: []sessionGrant{g(10, false), g(150, true)}}, 1},
		{"wait granted after the end", &sessionRecord{id: 7, ended: 100, grants: []sessionGrant{g(101, false)}}, 1},
		{"open again after the end", &sessionRecord{id: 7, ended: 100, reopened: []string{"KEEPALIVE answered 1 sent at +200ns"}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newSessionWorkload(&grantLog{})
			w.sessions = []*sessionRecord{tc.s}
			if got := w.check().violations; len(got) != tc.bad {
				t.Errorf("%d violations, want %d: %v", len(got), tc.bad, got)
			}
		})
	}
	// sawOpen records a reply sent after the end, not one sent before.
	s := &sessionRecord{id: 8}
	s.sawEnded(100, "KEEPALIVE answered 0")
	s.sawEnded(300, "INFO answered null")
	s.sawOpen(90, "INFO answered open")
	if s.ended != 100 || len(s.reopened) != 0 {
		t.Errorf("ended at %d, reopened %v; want 100 and none", s.ended, s.reopened)
	}
	s.sawOpen(110, "KEEPALIVE answered 1")
	if len(s.reopened) != 1 {
		t.Errorf("reopened %v, want one", s.reopened)
	}
}

func TestElectionCheck(t *testing.T) {
	term := func(id string, epoch uint64, call, ret int64) *electionTerm {
		return &electionTerm{id: id, epoch: epoch, call: call, ret: ret, values: []string{id + "/0"}}
	}
	read := func(call int64, epoch uint64, value string) leaderRead {
		return leaderRead{call: call, ret: call + 1, epoch: epoch, value: value}
	}
	type want struct{ epochs, store, reads int }
	tests := []struct {
		name   string
		terms  []*electionTerm
		writes []epochWrite
		reads  []leaderRead
		want   want
	}{
		{"clean", []*electionTerm{term("a", 5, 0, 10), term("b", 9, 5, 30)},
			[]epochWrite{{5, "a", "a/0"}, {5, "a", "a/0"}, {9, "b", "b/0"}},
			[]leaderRead{read(11, 5, "a/0"), read(31, 9, "b/0"), {call: 40, ret: 41, none: true}}, want{}},
		{"one epoch, two leaders", []*electionTerm{term("a", 5, 0, 10), term("b", 5, 5, 30)}, nil, nil, want{epochs: 1}},
		{"epoch goes back", []*electionTerm{term("a", 9, 0, 10), term("b", 5, 20, 30)}, nil, nil, want{epochs: 1}},
		{"concurrent campaigns in any order", []*electionTerm{term("a", 9, 0, 30), term("b", 5, 20, 25)}, nil, nil, want{}},
		{"store: epoch goes back", []*electionTerm{term("a", 5, 0, 10), term("b", 9, 20, 30)},
			[]epochWrite{{9, "b", "b/0"}, {5, "a", "a/0"}}, nil, want{store: 1}},
		{"store: an epoch written by another campaigner", []*electionTerm{term("a", 5, 0, 10)},
			[]epochWrite{{5, "a", "a/0"}, {5, "x", "x/0"}}, nil, want{store: 2}},
		{"read below a returned epoch", []*electionTerm{term("a", 5, 0, 10), term("b", 9, 20, 30)},
			nil, []leaderRead{read(31, 5, "a/0")}, want{reads: 1}},
		{"read before the campaign returned", []*electionTerm{term("a", 5, 0, 10), term("b", 9, 20, 30)},
			nil, []leaderRead{read(29, 5, "a/0")}, want{}},
		{"read a value never announced", []*electionTerm{term("a", 5, 0, 10)},
			nil, []leaderRead{read(11, 5, "b/0")}, want{reads: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newElectionWorkload(&grantLog{})
			w.terms, w.reads, w.store.accepted = tc.terms, tc.reads, tc.writes
			res := w.check()
			got := want{len(res[0].violations), len(res[1].violations), len(res[2].violations)}
			if got != tc.want {
				t.Errorf("violations (epochs, store, reads) = %v, want %v: %v %v %v", got, tc.want, res[0].violations, res[1].violations, res[2].violations)
			}
		})
	}
	// The store refuses a deposed leader's write, and its checker reports
	// one that got through.
	w := newElectionWorkload(&grantLog{})
	if err := w.store.write(9, "b", "b/0"); err != nil {
		t.Fatal(err)
	}
	var stale *fence.StaleTokenError
	if err := w.store.write(5, "a", "a/0"); !errors.As(err, &stale) {
		t.Fatalf("a write with epoch 5 after 9: %v, want a StaleTokenError", err)
	}
	w.store.stale = append(w.store.stale, epochWrite{5, "a", "a/0"})
	if got := w.checkStore().violations; len(got) != 1 {
		t.Errorf("a stale write accepted: %d violations, want 1: %v", len(got), got)
	}
}
