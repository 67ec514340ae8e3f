// Package client will be fencer's Go client library: leases with fencing
// tokens, automatic renewal, a lost-lease signal and blocking waits over RESP.
// It is not built yet (see the Go client issue); until then, use any Redis
// client with the FENCE.* commands described in docs/protocol.md.
package client
