package fenceetcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/fencerlock/fencer/fence"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Errors returned by Store, besides *fence.StaleTokenError for a refused
// write and the client's own errors.
var (
	// ErrDefinition means a Store was defined without a client or with an
	// empty token prefix, or a write names no key or would write inside
	// the token prefix, where only the Store writes.
	ErrDefinition = errors.New("fenceetcd: bad definition")
	// ErrTokenValue means a token key holds something other than a token
	// of 20 decimal digits: it was written by someone other than a Store.
	ErrTokenValue = errors.New("fenceetcd: token key does not hold a token")
)

// DefaultTokenPrefix is the prefix under which a Store keeps tokens unless
// WithTokenPrefix says otherwise.
const DefaultTokenPrefix = "fence/token/"

// tokenDigits is the width of a stored token: the digits of the largest
// uint64, 18446744073709551615. etcd compares values as bytes, and
// fixed-width decimals compare as bytes in the order of their numbers.
const tokenDigits = 20

// encode returns token as etcd stores it: tokenDigits decimal digits,
// zero-padded.
func encode(token uint64) string { return fmt.Sprintf("%0*d", tokenDigits, token) }

// decode parses a stored token.
func decode(v []byte) (uint64, bool) {
	if len(v) != tokenDigits {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	t, err := strconv.ParseUint(string(v), 10, 64)
	return t, err == nil
}

// Store runs fenced writes on etcd. It is safe for concurrent use.
type Store struct {
	kv     clientv3.KV
	prefix string
	end    string // the end of prefix's key range, as clientv3.WithPrefix makes it
}

// Option configures a Store.
type Option func(*Store)

// WithTokenPrefix sets the prefix of the keys that hold the tokens: the
// token of resource r is kept at prefix + r. Keep data out of this prefix;
// a write into it is refused with ErrDefinition. The default is
// DefaultTokenPrefix, "fence/token/".
func WithTokenPrefix(prefix string) Option {
	return func(s *Store) { s.prefix = prefix }
}

// New returns a Store that writes through kv: a *clientv3.Client, or any
// clientv3.KV such as a namespace.NewKV.
func New(kv clientv3.KV, opts ...Option) (*Store, error) {
	s := &Store{kv: kv, prefix: DefaultTokenPrefix}
	for _, o := range opts {
		o(s)
	}
	if c, ok := s.kv.(*clientv3.Client); s.kv == nil || ok && c == nil {
		return nil, fmt.Errorf("%w: no etcd client", ErrDefinition)
	}
	if s.prefix == "" {
		return nil, fmt.Errorf("%w: empty token prefix: tokens would share the keys of the data", ErrDefinition)
	}
	s.end = clientv3.GetPrefixRangeEnd(s.prefix)
	return s, nil
}

// TokenKey returns the key that holds resource's highest admitted token.
func (s *Store) TokenKey(resource string) string { return s.prefix + resource }

// Put sets key to value if token is at least key's highest admitted token,
// and records token as key's highest. opts go to the put of the value: for
// example clientv3.WithLease, which lets the value expire with a lease
// while its token stays.
func (s *Store) Put(ctx context.Context, key string, token uint64, value string, opts ...clientv3.OpOption) error {
	_, err := s.Txn(ctx, key, token, clientv3.OpPut(key, value, opts...))
	return err
}

// Delete deletes key if token is at least key's highest admitted token. The
// token is still recorded, so a stale writer cannot recreate the key.
func (s *Store) Delete(ctx context.Context, key string, token uint64) error {
	_, err := s.Txn(ctx, key, token, clientv3.OpDelete(key))
	return err
}

// Txn runs ops in one etcd transaction with the admission of token for
// resource: if token is at least resource's highest admitted token, etcd
// runs ops and records token as the highest; otherwise it runs none of
// them and Txn returns a *fence.StaleTokenError. resource is a name, not
// necessarily one of the keys the ops write; every writer of those keys
// must admit its writes under the same name.
//
// ops may be puts, deletes, gets and nested transactions (clientv3.OpTxn,
// etcd 3.3 and later), as long as none writes inside the token prefix
// (ErrDefinition). With no ops, Txn only records the token, which fences
// off the holders of lower tokens before any write. The response's
// Responses[i] answers ops[i]; one more response, for the recording of the
// token, follows them. etcd refuses a transaction that puts one key twice,
// and one with more operations than its --max-txn-ops (128 by default); the
// recording of the token is one.
//
// An error from the client, such as a deadline that passed while the
// transaction was on its way, leaves its outcome unknown: etcd may have run
// it. Sending the same ops again with the same token is safe (equal tokens
// are admitted, and a put or delete done twice leaves what one leaves); a
// refusal of the retry means a higher token got in, before or after the
// first attempt.
func (s *Store) Txn(ctx context.Context, resource string, token uint64, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if resource == "" {
		return nil, fmt.Errorf("%w: empty resource name", ErrDefinition)
	}
	if err := s.checkOps(ops); err != nil {
		return nil, err
	}
	tk, t := s.TokenKey(resource), encode(token)
	// The write's condition, "the token key does not exist yet (the first
	// write: CreateRevision == 0) or holds at most t", is written as the
	// else branch of its negation, because etcd ANDs the comparisons of
	// an If and has no <=. The refusal reads the token that refused it in
	// the same transaction, so Highest is the value compared.
	resp, err := s.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(tk), "!=", 0), clientv3.Compare(clientv3.Value(tk), ">", t)).
		Then(clientv3.OpGet(tk)).
		Else(append(ops[:len(ops):len(ops)], clientv3.OpPut(tk, t))...).
		Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return resp, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 {
		return nil, fmt.Errorf("%w: token key %q: refused, and read %d keys", ErrTokenValue, tk, len(kvs))
	}
	highest, ok := decode(kvs[0].Value)
	if !ok {
		return nil, fmt.Errorf("%w: token key %q holds %q", ErrTokenValue, tk, kvs[0].Value)
	}
	return nil, &fence.StaleTokenError{Resource: resource, Token: token, Highest: highest}
}

// Highest returns resource's highest admitted token, and false if no
// fenced write to resource was admitted.
func (s *Store) Highest(ctx context.Context, resource string) (uint64, bool, error) {
	tk := s.TokenKey(resource)
	resp, err := s.kv.Get(ctx, tk)
	if err != nil {
		return 0, false, err
	}
	if len(resp.Kvs) == 0 {
		return 0, false, nil
	}
	t, ok := decode(resp.Kvs[0].Value)
	if !ok {
		return 0, false, fmt.Errorf("%w: token key %q holds %q", ErrTokenValue, tk, resp.Kvs[0].Value)
	}
	return t, true, nil
}

// checkOps refuses ops that write inside the token prefix: a put there
// could lower another resource's token, a delete there could forget it.
func (s *Store) checkOps(ops []clientv3.Op) error {
	for _, op := range ops {
		switch {
		case op.IsTxn():
			_, then, els := op.Txn()
			if err := s.checkOps(then); err != nil {
				return err
			}
			if err := s.checkOps(els); err != nil {
				return err
			}
		case op.IsPut() || op.IsDelete():
			key := string(op.KeyBytes())
			if key == "" {
				return fmt.Errorf("%w: a write to an empty key", ErrDefinition)
			}
			if s.overlaps(key, string(op.RangeBytes())) {
				return fmt.Errorf("%w: a write to %q touches the token prefix %q", ErrDefinition, describe(op), s.prefix)
			}
		}
	}
	return nil
}

// overlaps reports whether the keys [key, end) meet the token prefix's
// [s.prefix, s.end). An empty end means the key alone, "\x00" means every
// key from key on (etcd's convention for both ends).
func (s *Store) overlaps(key, end string) bool {
	if end == "" {
		return strings.HasPrefix(key, s.prefix)
	}
	startsBeforePrefixEnds := s.end == "\x00" || key < s.end
	endsAfterPrefixStarts := end == "\x00" || end > s.prefix
	return startsBeforePrefixEnds && endsAfterPrefixStarts
}

// describe names an op's keys for an error message.
func describe(op clientv3.Op) string {
	key, end := string(op.KeyBytes()), string(op.RangeBytes())
	switch end {
	case "":
		return key
	case "\x00":
		return key + "…"
	}
	return key + ".." + end
}
