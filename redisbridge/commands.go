package redisbridge

import (
	"slices"
	"sort"
	"strings"

	"github.com/fencerlock/fencer/rediscompat"
)

// cmdSpec describes one command for COMMAND, COMMAND INFO and COMMAND DOCS,
// in Redis 7's format: enough for redis-cli's hints and for clients that
// look up key positions (go-redis, ioredis, redis-py).
type cmdSpec struct {
	arity             int
	flags             []string
	first, last, step int
	acl               []string
	group, summary    string
	subcommands       []string
}

// commandSpecs lists every command the bridge answers.
var commandSpecs = map[string]cmdSpec{
	"ping":         {arity: -1, flags: []string{"fast"}, acl: []string{"@fast", "@connection"}, group: "connection", summary: "Returns the server's liveliness response."},
	"echo":         {arity: 2, flags: []string{"fast"}, acl: []string{"@fast", "@connection"}, group: "connection", summary: "Returns the given string."},
	"quit":         {arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, acl: []string{"@fast", "@connection"}, group: "connection", summary: "Closes the connection."},
	"hello":        {arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, acl: []string{"@fast", "@connection"}, group: "connection", summary: "Handshakes with the server: RESP version, client name."},
	"auth":         {arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, acl: []string{"@fast", "@connection"}, group: "connection", summary: "Authenticates the connection (no password is configured)."},
	"select":       {arity: 2, flags: []string{"loading", "stale", "fast"}, acl: []string{"@fast", "@connection"}, group: "connection", summary: "Selects the database: fencer has only 0."},
	"client":       {arity: -2, acl: []string{"@slow"}, group: "connection", summary: "A container for client connection commands.", subcommands: []string{"id", "getname", "setname", "setinfo", "info"}},
	"reset":        {arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, acl: []string{"@fast", "@connection"}, group: "connection", summary: "Resets the connection."},
	"info":         {arity: -1, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@dangerous"}, group: "server", summary: "Returns information about the server."},
	"command":      {arity: -1, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"}, group: "server", summary: "Returns detailed information about the commands.", subcommands: []string{"count", "info", "docs", "list"}},
	"script":       {arity: -2, acl: []string{"@slow"}, group: "scripting", summary: "A container for script commands.", subcommands: []string{"load", "exists", "flush"}},
	"subscribe":    {arity: -2, flags: []string{"pubsub", "noscript", "loading", "stale"}, acl: []string{"@pubsub", "@slow"}, group: "pubsub", summary: "Listens for messages published to channels."},
	"unsubscribe":  {arity: -1, flags: []string{"pubsub", "noscript", "loading", "stale"}, acl: []string{"@pubsub", "@slow"}, group: "pubsub", summary: "Stops listening to channels."},
	"wait":         {arity: 3, flags: []string{"noscript"}, acl: []string{"@slow", "@connection"}, group: "generic", summary: "Returns at once the followers every acknowledged write has reached (a commit needs a quorum)."},
	"psubscribe":   {arity: -2, flags: []string{"pubsub", "noscript", "loading", "stale"}, acl: []string{"@pubsub", "@slow"}, group: "pubsub", summary: "Listens for messages published to channels that match patterns (* and ?)."},
	"punsubscribe": {arity: -1, flags: []string{"pubsub", "noscript", "loading", "stale"}, acl: []string{"@pubsub", "@slow"}, group: "pubsub", summary: "Stops listening to patterns."},
	"publish":      {arity: 3, flags: []string{"pubsub", "loading", "stale", "fast", "may_replicate"}, acl: []string{"@pubsub", "@fast"}, group: "pubsub", summary: "Posts a message to a channel, on every node."},
	"ssubscribe":   {arity: -2, flags: []string{"pubsub", "noscript", "loading", "stale"}, first: 1, last: -1, step: 1, acl: []string{"@pubsub", "@slow"}, group: "pubsub", summary: "Listens for messages published to shard channels."},
	"sunsubscribe": {arity: -1, flags: []string{"pubsub", "noscript", "loading", "stale"}, first: 1, last: -1, step: 1, acl: []string{"@pubsub", "@slow"}, group: "pubsub", summary: "Stops listening to shard channels."},
	"spublish":     {arity: 3, flags: []string{"pubsub", "loading", "stale", "fast", "may_replicate"}, first: 1, last: 1, step: 1, acl: []string{"@pubsub", "@fast"}, group: "pubsub", summary: "Posts a message to a shard channel, on every node."},

	"fence.acquire":    {arity: -4, flags: []string{"write"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Acquires a lock with a fencing token: key owner ttl-ms [WAIT ms] [SESSION id [VALUE v]]."},
	"fence.extend":     {arity: 4, flags: []string{"write"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Renews the owner's lease: key owner ttl-ms."},
	"fence.release":    {arity: -3, flags: []string{"write"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Releases the owner's lock: key owner [SESSION id]."},
	"fence.session":    {arity: -2, flags: []string{"write"}, group: "fencer", summary: "Opens, keeps alive, closes, revokes or describes a session: OPEN ttl-ms | KEEPALIVE id | CLOSE id | REVOKE id | INFO id."},
	"fence.proclaim":   {arity: 5, flags: []string{"write"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Sets the value of a lock held under a session: key owner session value."},
	"fence.holder":     {arity: 2, flags: []string{"readonly"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Returns the holder, token, remaining lease, session and value: key."},
	"fence.rlock":      {arity: -4, flags: []string{"write"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Acquires a read lock of a read-write lock: key owner ttl-ms [WAIT ms] [SESSION id]."},
	"fence.wlock":      {arity: -4, flags: []string{"write"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Acquires the write lock of a read-write lock: key owner ttl-ms [WAIT ms] [SESSION id]."},
	"fence.semacquire": {arity: -5, flags: []string{"write"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Acquires a permit of a semaphore: key owner ttl-ms permits [WAIT ms] [SESSION id]."},
	"fence.holders":    {arity: 2, flags: []string{"readonly"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Lists the holders of a lock, read-write lock or semaphore: key."},
	"fence.macquire":   {arity: -5, flags: []string{"write", "movablekeys"}, group: "fencer", summary: "Acquires several locks at once, all or none: owner ttl-ms numkeys key [key ...] [WAIT ms] [SESSION id]."},
	"fence.mextend":    {arity: -5, flags: []string{"write", "movablekeys"}, group: "fencer", summary: "Renews several locks in one entry: owner ttl-ms numkeys key [key ...]."},
	"fence.mrelease":   {arity: -4, flags: []string{"write", "movablekeys"}, group: "fencer", summary: "Releases several locks in one entry: owner numkeys key [key ...] [SESSION id]."},
	"fence.revoke":     {arity: 2, flags: []string{"write"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Frees a lock whoever holds it: key."},
	"fence.status":     {arity: 2, flags: []string{"readonly"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Returns the holder, token and remaining lease: key."},
	"fence.token":      {arity: -2, flags: []string{"readonly"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Returns the current grant's token: key [value]."},
	"fence.check":      {arity: 3, flags: []string{"readonly"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Reports whether a token is the current grant: key token."},
	"fence.leader":     {arity: 1, group: "fencer", summary: "Returns the leader's ID and client address."},
	"fence.watch":      {arity: -2, flags: []string{"pubsub", "noscript", "loading", "stale"}, first: 1, last: 1, step: 1, group: "fencer", summary: "Pushes every change of a lock's holder: key [FROM position]."},
	"fence.unwatch":    {arity: -1, flags: []string{"pubsub", "noscript", "loading", "stale"}, group: "fencer", summary: "Stops watching keys: [key ...]."},
	"fence.members":    {arity: 1, group: "fencer", summary: "Lists the cluster's members."},
	"fence.cluster":    {arity: 1, group: "fencer", summary: "Returns the cluster's ID, leader and members (with each one's version) as a map."},
	"fence.forming":    {arity: 1, group: "fencer", summary: "Returns what this node tells cluster formation (--bootstrap-expect): its ID, Raft address, expected servers, cluster ID and configuration."},
	"fence.join":       {arity: 4, flags: []string{"write"}, group: "fencer", summary: "Adds a member: id raft-addr client-addr."},
	"fence.remove":     {arity: 2, flags: []string{"write"}, group: "fencer", summary: "Removes a member: id."},
	"fence.transfer":   {arity: -1, flags: []string{"write"}, group: "fencer", summary: "Transfers leadership: [id]."},
	"fence.forwarded":  {arity: 1, group: "fencer", summary: "Marks a connection as one a node forwards commands over."},
}

func init() {
	// The Redis commands and scripts of the Redis-compatible layer.
	for _, name := range rediscompat.Names() {
		if _, own := commandSpecs[name]; own {
			continue
		}
		d, _ := rediscompat.Describe(name)
		acl := []string{"@slow"}
		if slices.Contains(d.Flags, "fast") {
			acl = []string{"@fast"}
		}
		commandSpecs[name] = cmdSpec{arity: d.Arity, flags: d.Flags, first: d.First, last: d.Last, step: d.Step,
			acl: acl, group: d.Group, summary: d.Summary}
	}
}

// hasSubcommands are the container commands, named "name|sub" in errors.
var hasSubcommands = map[string]bool{"client": true, "command": true, "script": true}

// allowedWhileSubscribed are the commands a RESP2 connection may send while
// it is subscribed to a channel.
var allowedWhileSubscribed = map[string]bool{
	"subscribe": true, "ssubscribe": true, "unsubscribe": true, "sunsubscribe": true,
	"psubscribe": true, "punsubscribe": true, "ping": true, "quit": true, "reset": true,
	"fence.watch": true, "fence.unwatch": true,
}

func sortedCommandNames() []string {
	names := make([]string, 0, len(commandSpecs))
	for n := range commandSpecs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// command: COMMAND | COMMAND COUNT | COMMAND LIST | COMMAND INFO name... |
// COMMAND DOCS [name...].
func (b *Bridge) command(r *request) {
	if len(r.args) == 1 {
		names := sortedCommandNames()
		r.c.WriteArray(len(names))
		for _, n := range names {
			r.commandInfo(n)
		}
		return
	}
	sub := strings.ToLower(string(r.args[1]))
	switch sub {
	case "count", "list":
		if len(r.args) != 2 {
			writeError(r.c, errf("wrong number of arguments for 'command|%s' command", sub))
			return
		}
		names := sortedCommandNames()
		if sub == "count" {
			r.c.WriteInt(len(names))
			return
		}
		r.c.WriteArray(len(names))
		for _, n := range names {
			r.c.WriteBulkString(n)
		}
	case "info":
		names := r.args[2:]
		if len(names) == 0 {
			for _, n := range sortedCommandNames() {
				names = append(names, []byte(n))
			}
		}
		r.c.WriteArray(len(names))
		for _, n := range names {
			name := strings.ToLower(string(n))
			if _, ok := commandSpecs[name]; !ok {
				r.null()
				continue
			}
			r.commandInfo(name)
		}
	case "docs":
		var names []string
		for _, n := range r.args[2:] {
			if _, ok := commandSpecs[strings.ToLower(string(n))]; ok {
				names = append(names, strings.ToLower(string(n)))
			}
		}
		if len(r.args) == 2 {
			names = sortedCommandNames()
		}
		r.mapHeader(len(names))
		for _, n := range names {
			s := commandSpecs[n]
			r.c.WriteBulkString(n)
			r.mapHeader(4)
			r.c.WriteBulkString("summary")
			r.c.WriteBulkString(s.summary)
			r.c.WriteBulkString("since")
			r.c.WriteBulkString("1.0.0")
			r.c.WriteBulkString("group")
			r.c.WriteBulkString(s.group)
			r.c.WriteBulkString("arguments")
			r.c.WriteArray(0)
		}
	default:
		writeError(r.c, errf("unknown subcommand '%s'. Try COMMAND HELP.", truncate(r.args[1], 128)))
	}
}

// commandInfo writes one COMMAND INFO entry: name, arity, flags, first key,
// last key, step, ACL categories, tips, key specs, subcommands.
func (r *request) commandInfo(name string) {
	s := commandSpecs[name]
	r.c.WriteArray(10)
	r.c.WriteBulkString(name)
	r.c.WriteInt(s.arity)
	r.c.WriteArray(len(s.flags))
	for _, f := range s.flags {
		r.c.WriteString(f)
	}
	r.c.WriteInt(s.first)
	r.c.WriteInt(s.last)
	r.c.WriteInt(s.step)
	r.c.WriteArray(len(s.acl))
	for _, a := range s.acl {
		r.c.WriteString(a)
	}
	r.c.WriteArray(0) // tips
	r.c.WriteArray(0) // key specs
	r.c.WriteArray(len(s.subcommands))
	for _, sub := range s.subcommands {
		r.c.WriteArray(10)
		r.c.WriteBulkString(name + "|" + sub)
		r.c.WriteInt(-2)
		r.c.WriteArray(0)
		for range 3 {
			r.c.WriteInt(0)
		}
		r.c.WriteArray(0)
		r.c.WriteArray(0)
		r.c.WriteArray(0)
		r.c.WriteArray(0)
	}
}
