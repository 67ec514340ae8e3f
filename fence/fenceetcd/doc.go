// Package fenceetcd makes etcd a fenced store: puts, deletes and
// transactions that carry a fencing token and happen only if it is at least
// the highest token already admitted for their resource (the rule of package
// fence).
//
// # One transaction per write
//
// Each write is one etcd transaction, so etcd runs the check, the write and
// the recording of the new token as one atomic step:
//
//	If   CreateRevision(tokenKey) != 0  AND  Value(tokenKey) > t
//	Then Get(tokenKey)                     refused: read the token that refused it
//	Else the writes…, Put(tokenKey, t)     admitted
//
// The Else branch is taken by the first write (the token key does not exist:
// CreateRevision == 0) and by every write whose token is not lower than the
// stored one (equal included); etcd has no <= and ANDs the comparisons of an
// If, so the condition is written as the negation of "refuse". A refusal
// reads the stored token in the same transaction, so the
// *fence.StaleTokenError reports the token that was compared.
//
// # Key layout and token format
//
// The token of resource r lives at the key prefix + r, with prefix
// DefaultTokenPrefix ("fence/token/") unless WithTokenPrefix says otherwise:
// the data keys stay as they are, a range read of the data does not see the
// tokens, and the tokens can be listed, watched or granted (etcd's RBAC
// grants key ranges) as one prefix. A write into that prefix through a Store
// is refused with ErrDefinition.
//
// etcd compares values as bytes, not as numbers: "10" < "9". Tokens are
// therefore stored fixed-width, as 20 decimal digits, zero-padded (the
// largest uint64 has 20 digits), and fixed-width decimals compare as bytes
// in the order of their numbers.
//
// A delete removes the value, not its token, so a stale writer cannot
// recreate a key that a newer holder deleted. A value put with a lease
// (clientv3.WithLease) expires with it; its token stays.
//
// # Not a fence.Validator
//
// fence.Validator's Admit runs a Go function as the write, which etcd cannot
// make part of a transaction; checking the token first and writing after
// would reopen the window the check is meant to close. Txn is the form etcd
// can make atomic: the writes given as clientv3.Op values, run in the
// transaction's admitting branch.
//
// # What is not protected
//
// Only writes made through a Store are checked: a put with the etcd client
// directly, or etcdctl, bypasses the fence. The fence is as durable as etcd
// (which fsyncs and replicates before it answers), but restoring the data
// from a snapshot without the tokens, or deleting the token prefix, forgets
// the tokens, and then a stale writer would be admitted.
package fenceetcd
