package fenceetcd

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestOverlaps covers the ends of etcd's key ranges that the tests on a
// server do not reach: a prefix with no end ("\xff" runs to the end of the
// keyspace) and ranges that stop just short of the prefix.
func TestOverlaps(t *testing.T) {
	cases := []struct {
		prefix string
		op     clientv3.Op
		want   bool
	}{
		{"t/", clientv3.OpPut("t/x", ""), true},
		{"t/", clientv3.OpPut("t", ""), false},
		{"t/", clientv3.OpPut("t0", ""), false},
		{"t/", clientv3.OpDelete("t/", clientv3.WithPrefix()), true},
		{"t/", clientv3.OpDelete("t", clientv3.WithPrefix()), true},
		{"t/", clientv3.OpDelete("s", clientv3.WithRange("t/")), false},
		{"t/", clientv3.OpDelete("s", clientv3.WithRange("t/\x00")), true},
		{"t/", clientv3.OpDelete("t0", clientv3.WithRange("z")), false},
		{"t/", clientv3.OpDelete("t/\xff", clientv3.WithRange("z")), true},
		{"t/", clientv3.OpDelete("t0", clientv3.WithFromKey()), false},
		{"t/", clientv3.OpDelete("a", clientv3.WithFromKey()), true},
		{"\xff", clientv3.OpDelete("a", clientv3.WithFromKey()), true},
		{"\xff", clientv3.OpDelete("a", clientv3.WithRange("\xff")), false},
		{"\xff", clientv3.OpDelete("a", clientv3.WithRange("\xff\x00")), true},
		{"\xff", clientv3.OpPut("\xff\xff", ""), true},
	}
	for _, c := range cases {
		s, err := New(clientv3.NewKVFromKVClient(nil, nil), WithTokenPrefix(c.prefix))
		if err != nil {
			t.Fatal(err)
		}
		got := s.overlaps(string(c.op.KeyBytes()), string(c.op.RangeBytes()))
		if got != c.want {
			t.Errorf("prefix %q, op on %q: overlaps = %v, want %v", c.prefix, describe(c.op), got, c.want)
		}
	}
}
