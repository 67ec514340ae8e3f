package redisbridge

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fencerlock/fencer/rediscompat"
)

// The one table of the commands the bridge answers. Each entry is the only
// place its command is described: dispatch (handle), the argument count,
// the access checks (permission: before AUTH, admin, the user's key
// pattern), what a RESP2 connection may send while subscribed, and what
// COMMAND, COMMAND INFO and COMMAND DOCS report all read it. Adding a
// native command is one entry in nativeCommands and one handler method.
//
// The Redis commands and scripts of the Redis-compatible layer join the
// table at init, from rediscompat's own table (rediscompat.Names and
// Describe), with the handler compat; they check their keys themselves.

// command is one entry of the table.
type command struct {
	name string
	// arity counts the name, as Redis's: n is exactly n arguments, -n at
	// least n. most, if set, bounds a variable count from above.
	arity, most int
	flags       cmdFlags
	// keys says which arguments are lock names the user's pattern must
	// match. Every entry declares it: positions, a numkeys rule, or none,
	// with the reason (register refuses an entry without).
	keys keySpec
	// adminSubcommands are subcommands that need an admin user (pattern
	// "*") although the command does not.
	adminSubcommands []string
	// subcommands are the container's subcommands (named "name|sub" in
	// errors and COMMAND).
	subcommands []string
	handler     handler
	// For COMMAND: Redis's flags beyond those cmdFlags and keys give
	// (write, readonly, blocking, movablekeys), ACL categories, the
	// group and a one-line summary.
	redisFlags     []string
	acl            []string
	group, summary string
}

// cmdFlags are what the bridge does differently for a command.
type cmdFlags uint16

const (
	// admin: only a user whose pattern is "*" may run it.
	admin cmdFlags = 1 << iota
	// write: it changes the lock table (COMMAND's "write").
	write
	// readonly: it only reads it (COMMAND's "readonly").
	readonly
	// blocking: it may wait (WAIT ms, BLPOP's timeout), past the request
	// timeout (COMMAND's "blocking").
	blocking
	// beforeAuth: served to a connection that has not authenticated.
	beforeAuth
	// whileSubscribed: a RESP2 connection may send it while subscribed
	// (RESP2 cannot tell a reply from a message; Redis allows only these).
	whileSubscribed
)

// keySpec is where a command's lock names are, in one of its forms:
// positions (first, last, step as COMMAND reports them; last -1 is the
// last argument), numKeysAt (the count of the keys that follow it), none
// (the reason the command names no lock; with positions and channels, the
// positions are shard channels COMMAND reports), or engine (the
// Redis-compatible layer checks every key itself).
type keySpec struct {
	first, last, step int
	numKeysAt         int
	none              string
	// channels marks positions that are shard channels, not locks:
	// COMMAND reports them, as Redis does for cluster clients; no
	// pattern applies.
	channels bool
	engine   bool
	// prefixForm: in FENCE.WATCH's prefix form the positions name no lock.
	prefixForm bool
}

// keyAt is a command's one lock name, at argument i.
func keyAt(i int) keySpec { return keySpec{first: i, last: i, step: 1} }

// keyUnlessPrefix is FENCE.WATCH's: a lock name at argument i, except in
// the form PREFIX p [FROM position], which names none (the user's pattern
// is applied to each event's key instead).
func keyUnlessPrefix(i int) keySpec { return keySpec{first: i, last: i, step: 1, prefixForm: true} }

// numKeysAt is "numkeys key [key ...]" with numkeys at argument i.
func numKeysAt(i int) keySpec { return keySpec{numKeysAt: i} }

// noKeys declares that a command names no lock, and why.
func noKeys(reason string) keySpec { return keySpec{none: reason} }

// shardChannels are the shard channels from argument first to last:
// COMMAND's key positions, never checked against a pattern.
func shardChannels(first, last int) keySpec {
	return keySpec{first: first, last: last, step: 1, channels: true, none: "shard channels, not locks"}
}

// declared reports whether the spec says something.
func (k keySpec) declared() bool { return k.first > 0 || k.numKeysAt > 0 || k.none != "" || k.engine }

// lockKeys returns the lock names args name, for the user's pattern.
func (k keySpec) lockKeys(args [][]byte) [][]byte {
	switch {
	case k.channels || k.engine, k.prefixForm && isPrefixWatch(args):
		return nil
	case k.numKeysAt > 0:
		return numKeysArgs(args, k.numKeysAt)
	case k.first > 0:
		last := k.last
		if last < 0 {
			last += len(args)
		}
		var keys [][]byte
		for i := k.first; i <= last && i < len(args); i += k.step {
			keys = append(keys, args[i])
		}
		return keys
	}
	return nil
}

// numKeysArgs returns the keys of a command whose numkeys is args[at], or,
// if that is not a count the arguments hold, every argument after at (so
// that a malformed command is checked against every name it might touch).
func numKeysArgs(args [][]byte, at int) [][]byte {
	if len(args) <= at {
		return nil
	}
	n, err := strconv.Atoi(string(args[at]))
	if err != nil || n < 0 || len(args) < at+1+n {
		return args[at+1:]
	}
	return args[at+1 : at+1+n]
}

// arityOK checks n arguments (the name included) against the entry.
func (c *command) arityOK(n int) bool {
	switch {
	case c.arity >= 0:
		return n == c.arity
	case n < -c.arity:
		return false
	}
	return c.most == 0 || n <= c.most
}

// needsAdmin reports whether args need an admin user.
func (c *command) needsAdmin(args [][]byte) bool {
	if c.flags&admin != 0 {
		return true
	}
	return len(args) > 1 && slices.ContainsFunc(c.adminSubcommands, func(s string) bool { return strings.EqualFold(s, string(args[1])) })
}

// commandFlags are the flags COMMAND reports.
func (c *command) commandFlags() []string {
	var out []string
	if c.flags&write != 0 {
		out = append(out, "write")
	}
	if c.flags&readonly != 0 {
		out = append(out, "readonly")
	}
	out = append(out, c.redisFlags...)
	if c.flags&blocking != 0 && !slices.Contains(out, "blocking") {
		out = append(out, "blocking")
	}
	if (c.keys.numKeysAt > 0 || c.keys.prefixForm) && !slices.Contains(out, "movablekeys") {
		out = append(out, "movablekeys")
	}
	return out
}

// errNoKeyDeclaration is register's error for an entry that does not say
// where its keys are: without it the key-pattern check would pass it by.
var errNoKeyDeclaration = errors.New("redisbridge: a command must declare its keys: keyAt, numKeysAt or noKeys with the reason")

// table is every command the bridge answers, by lower-case name.
type table map[string]*command

// register builds the table of cmds, refusing a nameless, handler-less or
// duplicate entry, or one that does not declare its keys.
func register(cmds []command) (table, error) {
	t := make(table, len(cmds))
	for i := range cmds {
		c := &cmds[i]
		switch {
		case c.name == "" || c.name != strings.ToLower(c.name):
			return nil, fmt.Errorf("redisbridge: command %q: names are lower case", c.name)
		case c.handler == nil:
			return nil, fmt.Errorf("redisbridge: command %q has no handler", c.name)
		case !c.keys.declared():
			return nil, fmt.Errorf("%w: %q", errNoKeyDeclaration, c.name)
		case c.arity == 0:
			return nil, fmt.Errorf("redisbridge: command %q has no arity", c.name)
		}
		if _, dup := t[c.name]; dup {
			return nil, fmt.Errorf("redisbridge: command %q given twice", c.name)
		}
		t[c.name] = c
	}
	return t, nil
}

// withCompat adds the Redis-compatible layer's commands that t does not
// answer itself.
func (t table) withCompat() {
	for _, name := range rediscompat.Names() {
		if _, own := t[name]; own {
			continue
		}
		d, _ := rediscompat.Describe(name)
		acl := []string{"@slow"}
		if slices.Contains(d.Flags, "fast") {
			acl = []string{"@fast"}
		}
		var fl cmdFlags
		if slices.Contains(d.Flags, "blocking") {
			fl = blocking
		}
		c := &command{name: name, arity: d.Arity, flags: fl, handler: (*Bridge).compat, keys: keySpec{first: d.First, last: d.Last, step: d.Step, engine: true},
			redisFlags: d.Flags, acl: acl, group: d.Group, summary: d.Summary}
		t[name] = c
	}
}

// commands is the table; set at init (its handlers read it: COMMAND).
var commands table

func init() {
	t, err := register(nativeCommands())
	if err != nil {
		panic(err)
	}
	t.withCompat()
	commands = t
}

// connFlags are the Redis flags of the connection commands that are
// served before anything else is ready.
var connFlags = []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}

var (
	aclConn   = []string{"@fast", "@connection"}
	aclPubSub = []string{"@pubsub", "@slow"}
	pubsubFl  = []string{"pubsub", "noscript", "loading", "stale"}
)

// nativeCommands are the commands the bridge itself answers.
func nativeCommands() []command {
	const (
		conn    = "a connection command: it names no lock"
		channel = "channels are not locks"
		cluster = "a cluster command: it names members, not locks"
	)
	return []command{
		{name: "ping", arity: -1, most: 2, flags: beforeAuth | whileSubscribed, keys: noKeys(conn), handler: (*Bridge).ping,
			redisFlags: []string{"fast"}, acl: aclConn, group: "connection", summary: "Returns the server's liveliness response."},
		{name: "echo", arity: 2, keys: noKeys(conn), handler: (*Bridge).echo,
			redisFlags: []string{"fast"}, acl: aclConn, group: "connection", summary: "Returns the given string."},
		{name: "quit", arity: -1, flags: beforeAuth | whileSubscribed, keys: noKeys(conn), handler: (*Bridge).quit,
			redisFlags: connFlags, acl: aclConn, group: "connection", summary: "Closes the connection."},
		{name: "hello", arity: -1, flags: beforeAuth, keys: noKeys(conn), handler: (*Bridge).hello,
			redisFlags: connFlags, acl: aclConn, group: "connection", summary: "Handshakes with the server: RESP version, client name."},
		{name: "auth", arity: -2, flags: beforeAuth, keys: noKeys(conn), handler: (*Bridge).auth,
			redisFlags: connFlags, acl: aclConn, group: "connection", summary: "Authenticates the connection (no password is configured)."},
		{name: "select", arity: 2, keys: noKeys(conn), handler: (*Bridge).selectDB,
			redisFlags: []string{"loading", "stale", "fast"}, acl: aclConn, group: "connection", summary: "Selects the database: fencer has only 0."},
		{name: "client", arity: -2, keys: noKeys(conn), handler: (*Bridge).client, subcommands: []string{"id", "getname", "setname", "setinfo", "info"},
			acl: []string{"@slow"}, group: "connection", summary: "A container for client connection commands."},
		{name: "reset", arity: 1, flags: whileSubscribed, keys: noKeys(conn), handler: (*Bridge).reset,
			redisFlags: connFlags, acl: aclConn, group: "connection", summary: "Resets the connection."},
		{name: "info", arity: -1, keys: noKeys("a server command: it names sections, not locks"), handler: (*Bridge).info,
			redisFlags: []string{"loading", "stale"}, acl: []string{"@slow", "@dangerous"}, group: "server", summary: "Returns information about the server."},
		{name: "command", arity: -1, keys: noKeys("it names commands, not locks"), handler: (*Bridge).command, subcommands: []string{"count", "info", "docs", "list"},
			redisFlags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"}, group: "server", summary: "Returns detailed information about the commands."},
		{name: "script", arity: -2, keys: noKeys("it names scripts; EVAL checks the keys a script is given"), handler: (*Bridge).compat, subcommands: []string{"load", "exists", "flush"},
			acl: []string{"@slow"}, group: "scripting", summary: "A container for script commands."},
		{name: "subscribe", arity: -2, flags: whileSubscribed, keys: noKeys(channel), handler: (*Bridge).subscribe,
			redisFlags: pubsubFl, acl: aclPubSub, group: "pubsub", summary: "Listens for messages published to channels."},
		{name: "unsubscribe", arity: -1, flags: whileSubscribed, keys: noKeys(channel), handler: (*Bridge).unsubscribe,
			redisFlags: pubsubFl, acl: aclPubSub, group: "pubsub", summary: "Stops listening to channels."},
		{name: "wait", arity: 3, keys: noKeys("it names replica counts, not locks"), handler: (*Bridge).wait,
			redisFlags: []string{"noscript"}, acl: []string{"@slow", "@connection"}, group: "generic", summary: "Returns at once the followers every acknowledged write has reached (a commit needs a quorum)."},
		{name: "psubscribe", arity: -2, flags: whileSubscribed, keys: noKeys(channel), handler: (*Bridge).subscribe,
			redisFlags: pubsubFl, acl: aclPubSub, group: "pubsub", summary: "Listens for messages published to channels that match patterns (* and ?)."},
		{name: "punsubscribe", arity: -1, flags: whileSubscribed, keys: noKeys(channel), handler: (*Bridge).unsubscribe,
			redisFlags: pubsubFl, acl: aclPubSub, group: "pubsub", summary: "Stops listening to patterns."},
		{name: "publish", arity: 3, keys: noKeys(channel), handler: (*Bridge).publish,
			redisFlags: []string{"pubsub", "loading", "stale", "fast", "may_replicate"}, acl: []string{"@pubsub", "@fast"}, group: "pubsub", summary: "Posts a message to a channel, on every node."},
		{name: "ssubscribe", arity: -2, flags: whileSubscribed, keys: shardChannels(1, -1), handler: (*Bridge).subscribe,
			redisFlags: pubsubFl, acl: aclPubSub, group: "pubsub", summary: "Listens for messages published to shard channels."},
		{name: "sunsubscribe", arity: -1, flags: whileSubscribed, keys: shardChannels(1, -1), handler: (*Bridge).unsubscribe,
			redisFlags: pubsubFl, acl: aclPubSub, group: "pubsub", summary: "Stops listening to shard channels."},
		{name: "spublish", arity: 3, keys: shardChannels(1, 1), handler: (*Bridge).publish,
			redisFlags: []string{"pubsub", "loading", "stale", "fast", "may_replicate"}, acl: []string{"@pubsub", "@fast"}, group: "pubsub", summary: "Posts a message to a shard channel, on every node."},

		{name: "fence.acquire", arity: -4, flags: write | blocking, keys: keyAt(1), handler: (*Bridge).acquire,
			group: "fencer", summary: "Acquires a lock with a fencing token: key owner ttl-ms [WAIT ms] [SESSION id [VALUE v]]."},
		{name: "fence.extend", arity: 4, flags: write, keys: keyAt(1), handler: (*Bridge).extend,
			group: "fencer", summary: "Renews the owner's lease: key owner ttl-ms."},
		{name: "fence.release", arity: -3, most: 5, flags: write, keys: keyAt(1), handler: (*Bridge).release,
			group: "fencer", summary: "Releases the owner's lock: key owner [SESSION id]."},
		{name: "fence.session", arity: 3, flags: write, keys: noKeys("it names sessions; a session's locks are checked when taken"), adminSubcommands: []string{"revoke"}, handler: (*Bridge).session,
			group: "fencer", summary: "Opens, keeps alive, closes, revokes or describes a session: OPEN ttl-ms | KEEPALIVE id | CLOSE id | REVOKE id | INFO id."},
		{name: "fence.proclaim", arity: 5, flags: write, keys: keyAt(1), handler: (*Bridge).proclaim,
			group: "fencer", summary: "Sets the value of a lock held under a session: key owner session value."},
		{name: "fence.holder", arity: 2, flags: readonly, keys: keyAt(1), handler: (*Bridge).holder,
			group: "fencer", summary: "Returns the holder, token, remaining lease, session and value: key."},
		{name: "fence.rlock", arity: -4, flags: write | blocking, keys: keyAt(1), handler: (*Bridge).rwlock,
			group: "fencer", summary: "Acquires a read lock of a read-write lock: key owner ttl-ms [WAIT ms] [SESSION id]."},
		{name: "fence.wlock", arity: -4, flags: write | blocking, keys: keyAt(1), handler: (*Bridge).rwlock,
			group: "fencer", summary: "Acquires the write lock of a read-write lock: key owner ttl-ms [WAIT ms] [SESSION id]."},
		{name: "fence.semacquire", arity: -5, flags: write | blocking, keys: keyAt(1), handler: (*Bridge).semacquire,
			group: "fencer", summary: "Acquires a permit of a semaphore: key owner ttl-ms permits [WAIT ms] [SESSION id]."},
		{name: "fence.holders", arity: 2, flags: readonly, keys: keyAt(1), handler: (*Bridge).holders,
			group: "fencer", summary: "Lists the holders of a lock, read-write lock or semaphore: key."},
		{name: "fence.macquire", arity: -5, flags: write | blocking, keys: numKeysAt(3), handler: (*Bridge).macquire,
			group: "fencer", summary: "Acquires several locks at once, all or none: owner ttl-ms numkeys key [key ...] [WAIT ms] [SESSION id]."},
		{name: "fence.mextend", arity: -5, flags: write, keys: numKeysAt(3), handler: (*Bridge).mextend,
			group: "fencer", summary: "Renews several locks in one entry: owner ttl-ms numkeys key [key ...]."},
		{name: "fence.mrelease", arity: -4, flags: write, keys: numKeysAt(2), handler: (*Bridge).mrelease,
			group: "fencer", summary: "Releases several locks in one entry: owner numkeys key [key ...] [SESSION id]."},
		{name: "fence.revoke", arity: 2, flags: write, keys: keyAt(1), handler: (*Bridge).revoke,
			group: "fencer", summary: "Frees a lock whoever holds it: key."},
		{name: "fence.status", arity: 2, flags: readonly, keys: keyAt(1), handler: (*Bridge).status,
			group: "fencer", summary: "Returns the holder, token and remaining lease: key."},
		{name: "fence.token", arity: -2, most: 3, flags: readonly, keys: keyAt(1), handler: (*Bridge).token,
			group: "fencer", summary: "Returns the current grant's token: key [value]."},
		{name: "fence.check", arity: 3, flags: readonly, keys: keyAt(1), handler: (*Bridge).check,
			group: "fencer", summary: "Reports whether a token is the current grant: key token."},
		{name: "fence.leader", arity: 1, keys: noKeys(cluster), handler: (*Bridge).leader,
			group: "fencer", summary: "Returns the leader's ID and client address."},
		{name: "fence.watch", arity: -2, most: 5, flags: whileSubscribed, keys: keyUnlessPrefix(1), handler: (*Bridge).watch,
			redisFlags: pubsubFl, group: "fencer", summary: "Pushes every change of a lock's holder, or of every lock under a prefix: key [FROM position] | PREFIX p [FROM position]."},
		{name: "fence.unwatch", arity: -1, flags: whileSubscribed, keys: noKeys("it ends the connection's own watches, each checked when it began"), handler: (*Bridge).unwatch,
			redisFlags: pubsubFl, group: "fencer", summary: "Stops watching keys, or a prefix: [key ...] | PREFIX p."},
		{name: "fence.members", arity: 1, keys: noKeys(cluster), handler: (*Bridge).members,
			group: "fencer", summary: "Lists the cluster's members."},
		{name: "fence.cluster", arity: 1, keys: noKeys(cluster), handler: (*Bridge).cluster,
			group: "fencer", summary: "Returns the cluster's ID, leader and members (with each one's version) as a map."},
		{name: "fence.forming", arity: 1, keys: noKeys(cluster), handler: (*Bridge).forming,
			group: "fencer", summary: "Returns what this node tells cluster formation (--bootstrap-expect): its ID, Raft address, expected servers, cluster ID and configuration."},
		{name: "fence.join", arity: 4, flags: admin | write, keys: noKeys(cluster), handler: (*Bridge).join,
			group: "fencer", summary: "Adds a member: id raft-addr client-addr."},
		{name: "fence.remove", arity: 2, flags: admin | write, keys: noKeys(cluster), handler: (*Bridge).remove,
			group: "fencer", summary: "Removes a member: id."},
		{name: "fence.transfer", arity: -1, most: 2, flags: admin | write, keys: noKeys(cluster), handler: (*Bridge).transfer,
			group: "fencer", summary: "Transfers leadership: [id]."},
		{name: "fence.forwarded", arity: 1, flags: admin, keys: noKeys("it marks the connection, between nodes"), handler: (*Bridge).forwarded,
			group: "fencer", summary: "Marks a connection as one a node forwards commands over."},
		{name: "fence.statehash", arity: 1, flags: admin, keys: noKeys("it hashes the whole table, this node's own"), handler: (*Bridge).statehash,
			group: "fencer", summary: "Returns this node's applied index and the SHA-256 of its lock table (never forwarded)."},
		{name: "fence.snapshot", arity: 1, flags: admin, keys: noKeys("it reads the whole table, as an admin"), handler: (*Bridge).snapshot,
			group: "fencer", summary: "Returns the lock table's snapshot, from the leader."},
		{name: "fence.progress", arity: 1, flags: admin, keys: noKeys("it reports this node's own progress"), handler: (*Bridge).progress,
			group: "fencer", summary: "Returns this node's own progress: role, term, log, commit and applied indexes, last contact with a leader, version (never forwarded)."},
		{name: "fence.health", arity: 1, flags: admin, keys: noKeys(cluster), handler: (*Bridge).health,
			group: "fencer", summary: "Returns the leader's view of every member's health: reachable, last answer, lag, version."},
		{name: "fence.locks", arity: -1, most: 11, flags: readonly, keys: noKeys("a listing: it shows only the names the user's pattern allows"), handler: (*Bridge).locks,
			group: "fencer", summary: "Lists locks by name with holders, tokens, time left and waiters, a page at a time: [PREFIX p] [AFTER name] [COUNT n] [MATCH pattern] [ELECTIONS]."},
		{name: "fence.sessions", arity: -1, most: 7, flags: readonly, keys: noKeys("it names sessions; a user limited to a pattern sees only its own"), handler: (*Bridge).sessions,
			group: "fencer", summary: "Lists open sessions with their user, TTL and locks, a page at a time: [AFTER id] [COUNT n] [USER name]."},
		{name: "fence.onbehalf", arity: -4, flags: admin, keys: noKeys("it runs the command it carries, whose own keys are checked then"), handler: (*Bridge).onbehalf,
			group: "fencer", summary: "Runs a forwarded command as the user who sent it to the forwarding node: user pattern command [arg ...]."},
		{name: "fence.onbehalfclient", arity: -6, flags: admin, keys: noKeys("it runs the command it carries, whose own keys are checked then"), handler: (*Bridge).onbehalfclient,
			group: "fencer", summary: "Runs a forwarded command as the user who sent it to the forwarding node, recording that client's address and name: user pattern addr name command [arg ...]."},
	}
}

func sortedCommandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
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
			if _, ok := commands[name]; !ok {
				r.null()
				continue
			}
			r.commandInfo(name)
		}
	case "docs":
		var names []string
		for _, n := range r.args[2:] {
			if _, ok := commands[strings.ToLower(string(n))]; ok {
				names = append(names, strings.ToLower(string(n)))
			}
		}
		if len(r.args) == 2 {
			names = sortedCommandNames()
		}
		r.mapHeader(len(names))
		for _, n := range names {
			s := commands[n]
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
	s := commands[name]
	flags := s.commandFlags()
	r.c.WriteArray(10)
	r.c.WriteBulkString(name)
	r.c.WriteInt(s.arity)
	r.c.WriteArray(len(flags))
	for _, f := range flags {
		r.c.WriteString(f)
	}
	r.c.WriteInt(s.keys.first)
	r.c.WriteInt(s.keys.last)
	r.c.WriteInt(s.keys.step)
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
