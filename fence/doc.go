// Package fence is the storage side of fencer: validators that reject a write
// whose fencing token is lower than one the storage has already admitted.
//
// A lease from a lock service cannot by itself stop a writer that was paused
// (a GC pause, a page fault, SIGSTOP) or whose request was delayed in the
// network: by the time its write arrives, the lease may have passed to
// someone else. fencer issues a fencing token with every grant, a number that
// grows with every grant of any lock. The storage that the lock protects
// keeps, for each resource, the highest token it has admitted, and admits a
// write carrying token t only if t is at least that highest token. Equal is
// allowed: one holder may write many times. The check and the write must be
// one atomic step, or a stale writer could pass the check and land its write
// after a newer one.
//
// # The rule and the adapters
//
// Check is the rule; a refusal is a *StaleTokenError, which carries both
// numbers and matches ErrStaleToken under errors.Is. Validator is the shape
// of a validator that runs a write under the rule; Memory is the in-process
// one and the reference the others are tested against. The adapters live in
// subpackages, so that this package needs only the standard library:
//
//   - fence/fencehttp: net/http middleware that admits a request by its
//     Fencing-Token header (stale: 409 Conflict), and an http.RoundTripper
//     that sets the header on a client's requests;
//   - fence/fencesql: database/sql, a row write conditional on the row's
//     token column in one statement, or any writes in a transaction admitted
//     through a table of tokens (PostgreSQL, SQLite, MySQL and MariaDB);
//   - fence/fenceredis: Redis as the protected storage, fenced SET, HSET and
//     DEL, each one Lua script;
//   - fence/fenceetcd: etcd as the protected storage, a fenced put, delete
//     or set of operations, each one etcd transaction. It is a Go module of
//     its own, so that this module does not depend on etcd's client and
//     gRPC.
//
// # Read-write locks and semaphores
//
// Their holders hold together, each with a token of its own, so "highest
// token wins" would refuse all but the newest. RWValidator is the rule for a
// read-write lock: a read is admitted at or above the highest writer token,
// a write at or above every token seen (RWMemory in process,
// fenceredis.RWStore, fencesql.RWTokens). A semaphore is fenced per slot
// with the plain rule, under the name SlotResource gives.
//
// There is no gRPC interceptor: it would make this module depend on
// google.golang.org/grpc for a few lines that fencehttp's middleware shows
// how to write (read the token from metadata, call Validator.Admit around
// the handler, answer a *StaleTokenError with codes.FailedPrecondition).
//
// # What a token does not protect
//
// Only the storage that checks the token is protected. A stale holder can
// still send an email, call an API that does not check tokens, or write to a
// second store that does not; see docs/fencing.md.
//
// This package never imports fencer's server or client: a token is a uint64,
// however it was obtained.
package fence
