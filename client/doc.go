// Package client is fencer's Go client: leases on named locks, each with a
// fencing token, kept alive in the background, with a signal when they are
// lost and blocking waits served in order of arrival.
//
// # The safe pattern
//
// A lock service cannot by itself stop a client that has lost its lease
// without noticing (a long GC pause, a stopped VM, a partition) from writing
// to the storage the lock protects. The fencing token can: every grant of a
// lock gets a token larger than every earlier grant's, so the storage keeps
// the largest token it has seen and refuses writes that carry a smaller one.
//
//	c, err := client.New([]string{"10.0.0.1:7379", "10.0.0.2:7379", "10.0.0.3:7379"})
//	...
//	lease, err := c.Acquire(ctx, "orders/42", client.WithAutoRenew())
//	if err != nil { ... }
//	defer lease.Release(context.WithoutCancel(ctx))
//	// Work under lease.Context(): it is cancelled when the lease is lost.
//	// The storage refuses a stale token (see package fence for validators).
//	err = store.Put(lease.Context(), "orders/42", order, lease.Token())
//
// # Leases
//
// Client.Acquire waits in the server's FIFO queue for the lock (no polling)
// and returns a Lease; Client.TryAcquire does not wait. A lease's validity
// is counted by the client from just before it sent the request that granted
// or last extended it, less a drift allowance, so the client's view of the
// lease always ends before the server's. With WithAutoRenew the lease is
// extended about every TTL/3; failures that may pass (a node down, an
// election) are retried on the other addresses, and the lease's context is
// cancelled only when the server says the lease is gone or its validity runs
// out.
//
// # redsync
//
// Client.NewMutex returns a Mutex with the API of redsync's, plus Token.
//
// # Nodes and retries
//
// Any node of the cluster accepts any command and forwards it to the leader.
// The client sends to one of its addresses, moves to the leader when it is
// one of them, and after a timeout or a failure tries the next address:
// acquire, extend and release are idempotent for the same owner, and every
// lease has its own random owner. The errors the client returns wrap the
// sentinel errors ErrLocked, ErrLeaseLost, ErrNoLeader, ErrInvalidArgument
// (and the context's error); test for them with errors.Is.
//
// # Authentication and TLS
//
// WithAuth gives the user and password that every new connection, to
// every node, authenticates with before its first command (fencerd
// --requirepass, --users); WithTLS dials the nodes over TLS (fencerd
// --tls-cert-file), with a client certificate if the cluster requires one.
// A refusal of the credentials (ErrAuth) or of the TLS handshake (ErrTLS)
// is returned at once rather than retried on other nodes, and a lock
// outside the user's pattern fails with ErrNoPerm.
//
// The client speaks RESP (the Redis protocol) through go-redis; it does not
// depend on the server's packages.
package client
