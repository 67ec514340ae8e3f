package server

import (
	"context"

	"github.com/fencerlock/fencer/fsm"
)

// The client that took each lock: the leader's record, not the log's.
//
// A listing shows, beside each holder, the user, address and connection
// name of the client whose acquire the grant answered. The log entry and
// the snapshot do not carry it (adding it would change their format); the
// node that serves the acquire, the leader, records it in memory beside
// the grant once the acquire returns it, and drops it when the grant ends
// (every node applies that end, so a record never outlives its grant). A
// grant is named by its key and token, which no other grant ever has, so a
// record can be missing (a grant made under an earlier leader, by a Redis
// write or script, or listed in the moment between its entry and the
// acquire's return) but never names another grant's client.

// ClientInfo identifies the client connection a request came from.
type ClientInfo struct {
	// User is the authenticated user ("default" when authentication is
	// off), Addr the connection's remote address, Name its CLIENT SETNAME.
	User, Addr, Name string
}

type clientInfoKey struct{}

// WithClient returns ctx carrying the client a request came from: an
// acquire made with it is recorded beside its grant (Holding.Client).
func WithClient(ctx context.Context, c ClientInfo) context.Context {
	return context.WithValue(ctx, clientInfoKey{}, c)
}

func clientOf(ctx context.Context) (ClientInfo, bool) {
	c, ok := ctx.Value(clientInfoKey{}).(ClientInfo)
	return c, ok
}

// grantClients are the records, by key (a plain lock has one grant, a
// shared key a few: a slice each) and token.
type grantClients struct {
	byKey map[string][]tokenClient
	n     int
}

type tokenClient struct {
	token  uint64
	client ClientInfo
}

// recordClient records ctx's client, if it has one, beside the grant
// token of key.
func (g *grants) recordClient(ctx context.Context, key string, token uint64) {
	c, ok := clientOf(ctx)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.recordClientLocked(key, token, c)
}

// recordClientLocked records c beside the grant token of key, if the
// grant is still live (it may have ended before the acquire returned).
func (g *grants) recordClientLocked(key string, token uint64, c ClientInfo) {
	if token == 0 || !g.liveLocked(key, token) {
		return
	}
	gc := &g.clients
	if gc.n >= g.maxLocks {
		// Full: the records of grants that ended unseen (one a command
		// on another key ended) go first; a record beyond is not kept.
		for k := range gc.byKey {
			g.dropEndedClientsLocked(k)
		}
		if gc.n >= g.maxLocks {
			return
		}
	}
	if gc.byKey == nil {
		gc.byKey = make(map[string][]tokenClient)
	}
	for _, tc := range gc.byKey[key] {
		if tc.token == token {
			return // (a renewal by the same owner: the grant's first client took it)
		}
	}
	gc.byKey[key] = append(gc.byKey[key], tokenClient{token, c})
	gc.n++
}

// liveLocked reports whether key is held by the grant token.
func (g *grants) liveLocked(key string, token uint64) (live bool) {
	g.table.Peek(key, func(l *fsm.Lease) {
		switch {
		case l == nil:
		case l.Shared != nil:
			for _, h := range l.Shared.Holders {
				if h.Token == token {
					live = true
					return
				}
			}
		default:
			live = l.Token == token
		}
	})
	return live
}

// dropEndedClientsLocked forgets the records of key's grants that ended.
func (g *grants) dropEndedClientsLocked(key string) {
	tcs, ok := g.clients.byKey[key]
	if !ok {
		return
	}
	kept := tcs[:0]
	for _, tc := range tcs {
		if g.liveLocked(key, tc.token) {
			kept = append(kept, tc)
		}
	}
	g.clients.n -= len(tcs) - len(kept)
	if len(kept) == 0 {
		delete(g.clients.byKey, key)
	} else {
		clear(tcs[len(kept):])
		g.clients.byKey[key] = kept
	}
}

// clientLocked returns the record of key's grant token, or nil.
func (g *grants) clientLocked(key string, token uint64) *ClientInfo {
	for _, tc := range g.clients.byKey[key] {
		if tc.token == token {
			c := tc.client
			return &c
		}
	}
	return nil
}
