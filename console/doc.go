// Package console is fencerd's web console (--ui): the lock table with
// holders, tokens, live lease countdowns and the leader's wait queues, the
// grants and releases as they happen, sessions, elections, and, for an
// admin, the members with their health; and two actions, revoke a lock and
// transfer leadership.
//
// # What it trusts
//
// The console is a client of its own node: every read and action goes over
// RESP to the node's client port, authenticated as the user who logged in,
// so the bridge's own checks decide what that user may see and do (a user
// limited to a pattern gets only the names it allows from FENCE.LOCKS; the
// admin commands refuse it), forwarding to the leader works as for any
// client, and the audit trail names the user. The only thing it reads from
// the node in process is the watch by prefix (the live feed), whose events
// it filters by the user's pattern itself.
//
// The password a user logs in with is kept in memory for as long as the
// session lives (it authenticates the session's connection to the node); it
// is never written anywhere, never in a cookie, never in a URL. The session
// is a random ID in a cookie that scripts cannot read (HttpOnly), that is
// not sent with requests from other sites (SameSite=Strict) and, when the
// console is served over TLS, only over TLS (Secure).
//
// Every request that reads or changes anything is a POST carrying the
// session's token (X-Fencer-Token, handed out by the login) whose Origin
// header names the console itself; the page, its script and its styles are
// the only GETs and hold no data. Revoke and transfer need an admin user
// (pattern *) and a confirmation: the name of what they act on, typed
// again.
//
// # Positions
//
// The feed sends two kinds of state, each stamped with a log position: the
// listing (FENCE.LOCKS, re-read every second on the leader) and the events
// of the watch (from this node's applied log). The page (assets/app.js)
// keeps, per lock, the position of what it shows, and replaces it only with
// something from a later position; so a listing that a new leader answered
// from behind what the page has seen, or an event replayed after a
// reconnect, never takes the page back.
package console
