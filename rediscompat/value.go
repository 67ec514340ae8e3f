package rediscompat

import (
	"encoding/binary"
	"errors"
	"math"
	"sort"
)

// The encodings of the kinds other than strings, as the table stores them
// (fsm.Lease.Data). The table only stores the bytes; this package alone reads
// and writes them. Each is a uvarint count, then the elements.

// hash is a Redis hash. Fields keep the order they were added in, as a small
// Redis hash (a listpack) returns them.
type hash struct {
	fields []string
	values map[string]string
}

func newHash() *hash { return &hash{values: make(map[string]string)} }

func (h *hash) get(f string) (string, bool) {
	v, ok := h.values[f]
	return v, ok
}

// set sets f and reports whether it is a new field.
func (h *hash) set(f, v string) bool {
	_, had := h.values[f]
	if !had {
		h.fields = append(h.fields, f)
	}
	h.values[f] = v
	return !had
}

func (h *hash) del(f string) bool {
	if _, had := h.values[f]; !had {
		return false
	}
	delete(h.values, f)
	for i, x := range h.fields {
		if x == f {
			h.fields = append(h.fields[:i], h.fields[i+1:]...)
			break
		}
	}
	return true
}

func (h *hash) len() int { return len(h.fields) }

func (h *hash) encode() string {
	b := binary.AppendUvarint(nil, uint64(len(h.fields)))
	for _, f := range h.fields {
		b = appendStr(b, f)
		b = appendStr(b, h.values[f])
	}
	return string(b)
}

func decodeHash(s string) (*hash, error) {
	d := reader{b: []byte(s)}
	n := d.count()
	h := &hash{values: make(map[string]string, n)}
	for i := 0; i < n && d.err == nil; i++ {
		f, v := d.str(), d.str()
		h.set(f, v)
	}
	return h, d.done()
}

// zset is a Redis sorted set: members ordered by score, then by member.
type zset struct {
	members []zmember
	scores  map[string]float64
}

type zmember struct {
	name  string
	score float64
}

func newZset() *zset { return &zset{scores: make(map[string]float64)} }

func zless(a, b zmember) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return a.name < b.name
}

func (z *zset) len() int { return len(z.members) }

func (z *zset) score(m string) (float64, bool) {
	s, ok := z.scores[m]
	return s, ok
}

// add sets m's score and reports whether m is new.
func (z *zset) add(m string, score float64) bool {
	_, had := z.scores[m]
	if had {
		z.remove(m)
	}
	z.scores[m] = score
	e := zmember{m, score}
	i := sort.Search(len(z.members), func(i int) bool { return !zless(z.members[i], e) })
	z.members = append(z.members, zmember{})
	copy(z.members[i+1:], z.members[i:])
	z.members[i] = e
	return !had
}

func (z *zset) remove(m string) bool {
	s, had := z.scores[m]
	if !had {
		return false
	}
	delete(z.scores, m)
	e := zmember{m, s}
	i := sort.Search(len(z.members), func(i int) bool { return !zless(z.members[i], e) })
	z.members = append(z.members[:i], z.members[i+1:]...)
	return true
}

// rank returns m's 0-based rank by ascending score.
func (z *zset) rank(m string) (int, bool) {
	s, had := z.scores[m]
	if !had {
		return 0, false
	}
	e := zmember{m, s}
	return sort.Search(len(z.members), func(i int) bool { return !zless(z.members[i], e) }), true
}

func (z *zset) encode() string {
	b := binary.AppendUvarint(nil, uint64(len(z.members)))
	for _, m := range z.members {
		b = appendStr(b, m.name)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(m.score))
	}
	return string(b)
}

func decodeZset(s string) (*zset, error) {
	d := reader{b: []byte(s)}
	n := d.count()
	z := &zset{members: make([]zmember, 0, n), scores: make(map[string]float64, n)}
	for i := 0; i < n && d.err == nil; i++ {
		m := d.str()
		sc := math.Float64frombits(d.u64())
		z.members = append(z.members, zmember{m, sc})
		z.scores[m] = sc
	}
	return z, d.done()
}

// list is a Redis list.
type list struct{ items []string }

func (l *list) encode() string {
	b := binary.AppendUvarint(nil, uint64(len(l.items)))
	for _, it := range l.items {
		b = appendStr(b, it)
	}
	return string(b)
}

func decodeList(s string) (*list, error) {
	d := reader{b: []byte(s)}
	n := d.count()
	l := &list{items: make([]string, 0, n)}
	for i := 0; i < n && d.err == nil; i++ {
		l.items = append(l.items, d.str())
	}
	return l, d.done()
}

// set is a Redis set; members keep the order they were added in.
type set struct {
	members []string
	has     map[string]bool
}

func newSet() *set { return &set{has: make(map[string]bool)} }

func (s *set) len() int { return len(s.members) }

func (s *set) add(m string) bool {
	if s.has[m] {
		return false
	}
	s.has[m] = true
	s.members = append(s.members, m)
	return true
}

func (s *set) remove(m string) bool {
	if !s.has[m] {
		return false
	}
	delete(s.has, m)
	for i, x := range s.members {
		if x == m {
			s.members = append(s.members[:i], s.members[i+1:]...)
			break
		}
	}
	return true
}

func (s *set) encode() string {
	b := binary.AppendUvarint(nil, uint64(len(s.members)))
	for _, m := range s.members {
		b = appendStr(b, m)
	}
	return string(b)
}

func decodeSet(v string) (*set, error) {
	d := reader{b: []byte(v)}
	n := d.count()
	s := &set{members: make([]string, 0, n), has: make(map[string]bool, n)}
	for i := 0; i < n && d.err == nil; i++ {
		s.add(d.str())
	}
	return s, d.done()
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// errCorrupt means a stored value could not be decoded: the table holds
// bytes this package did not write.
var errCorrupt = errors.New("rediscompat: a stored value is corrupt")

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads an element count, bounded by the bytes left (every element
// takes at least one).
func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = errCorrupt
		return 0
	}
	return int(n)
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errCorrupt
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) u64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.err = errCorrupt
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = errCorrupt
	}
	return r.err
}
