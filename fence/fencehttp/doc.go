// Package fencehttp carries fencing tokens over HTTP.
//
// On the server, Middleware admits a request that writes to a protected
// resource only if its Fencing-Token header is at least the highest token
// already admitted for that resource (see package fence): the handler runs
// inside the validator's atomic step, so a stale writer's request is refused
// with 409 Conflict before it can change anything. A request without a token,
// or with one that is not a decimal number, gets 400 Bad Request unless
// WithBadToken says otherwise.
//
// On the client, Transport is an http.RoundTripper that sets the header on
// every request from the lease the client holds (any value with a Token
// method, or a TokenFunc), or from a token put in the request's context with
// fence.WithToken.
//
//	// server
//	v := fence.NewMemory()
//	byPath := func(r *http.Request) string { return r.URL.Path }
//	http.Handle("/docs/", fencehttp.Middleware(v, byPath)(docs))
//
//	// client, holding a lease
//	hc := &http.Client{Transport: &fencehttp.Transport{Source: lease}}
package fencehttp
