package redisbridge

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An entry that does not say where its keys are is refused: without the
// declaration the key-pattern check would let the command through for any
// key (the access check would fail open).
func TestRegisterRefusesACommandWithoutAKeyDeclaration(t *testing.T) {
	ok := command{name: "fence.x", arity: 2, keys: keyAt(1), handler: (*Bridge).status}
	_, err := register([]command{ok})
	require.NoError(t, err)

	undeclared := command{name: "fence.x", arity: 2, handler: (*Bridge).status}
	_, err = register([]command{undeclared})
	require.Error(t, err)
	assert.True(t, errors.Is(err, errNoKeyDeclaration), "%v", err)
	assert.Contains(t, err.Error(), `"fence.x"`)

	none := command{name: "fence.x", arity: 1, keys: noKeys("names no lock"), handler: (*Bridge).leader}
	_, err = register([]command{none})
	require.NoError(t, err, "an explicit no-keys with its reason is a declaration")

	_, err = register([]command{ok, ok})
	assert.ErrorContains(t, err, "given twice")
	_, err = register([]command{{name: "FENCE.X", arity: 2, keys: keyAt(1), handler: (*Bridge).status}})
	assert.ErrorContains(t, err, "lower case")
}

// nativeKeyed are the native entries that name locks.
func nativeKeyed(t *testing.T) []*command {
	t.Helper()
	var out []*command
	for _, c := range nativeCommands() {
		if c.keys.first > 0 && !c.keys.channels || c.keys.numKeysAt > 0 {
			out = append(out, &c)
		}
	}
	require.NotEmpty(t, out)
	return out
}

// argsWithKey builds a command of the smallest count its arity allows
// whose lock names are all key; the other arguments are filler (the access
// check comes before the handler reads them).
func argsWithKey(c *command, key string) []string {
	n := c.arity
	if n < 0 {
		n = -n
	}
	k := c.keys
	if k.numKeysAt > 0 {
		n = max(n, k.numKeysAt+2)
	}
	args := make([]string, n)
	args[0] = strings.ToUpper(c.name)
	for i := 1; i < n; i++ {
		args[i] = "1"
	}
	if k.numKeysAt > 0 {
		args[k.numKeysAt], args[k.numKeysAt+1] = "1", key
		return args
	}
	if k.first == 0 {
		return args
	}
	last := k.last
	if last < 0 {
		last += n
	}
	for i := k.first; i <= last && i < n; i += k.step {
		args[i] = key
	}
	return args
}

// For every native command of the table that names a lock, a user whose
// pattern excludes the lock is refused with NOPERM, and one it includes is
// not: the table decides, so a command added to it is covered here without
// a change to this test.
func TestEveryNativeCommandChecksTheKeyPattern(t *testing.T) {
	addr := startAuth(t) // alice may use app:*
	keyed := nativeKeyed(t)
	var names []string
	for _, c := range keyed {
		names = append(names, c.name)
		t.Run(c.name, func(t *testing.T) {
			denied := argsWithKey(c, "other:1")
			rc := dialRaw(t, addr)
			require.Equal(t, "+OK\r\n", rc.do("AUTH", "alice", "apw"))
			assert.Equal(t, string(errorLine(noPermKey)), rc.do(denied...), "%q", denied)

			allowed := argsWithKey(c, "app:1")
			rc = dialRaw(t, addr)
			require.Equal(t, "+OK\r\n", rc.do("AUTH", "alice", "apw"))
			assert.NotContains(t, rc.do(allowed...), "NOPERM", "%q", allowed)
		})
	}
	sort.Strings(names)
	t.Logf("%d native commands name locks: %s", len(names), strings.Join(names, " "))
	assert.Subset(t, names, []string{"fence.acquire", "fence.macquire", "fence.mrelease", "fence.watch"})
}

// Every admin command, and FENCE.SESSION REVOKE, is refused to a user
// whose pattern is not "*".
func TestEveryAdminCommandNeedsPatternStar(t *testing.T) {
	addr := startAuth(t)
	var admins [][]string
	for _, c := range nativeCommands() {
		if c.flags&admin != 0 {
			admins = append(admins, argsWithKey(&c, "app:1"))
		}
		for _, sub := range c.adminSubcommands {
			admins = append(admins, []string{strings.ToUpper(c.name), strings.ToUpper(sub), "1"})
		}
	}
	require.True(t, slices.ContainsFunc(admins, func(a []string) bool { return a[0] == "FENCE.STATEHASH" }))
	for _, args := range admins {
		rc := dialRaw(t, addr)
		require.Equal(t, "+OK\r\n", rc.do("AUTH", "alice", "apw"))
		assert.Contains(t, rc.do(args...), "-NOPERM User alice has no permissions to run the", "%q", args)
	}
}

// COMMAND lists every command the bridge dispatches, FENCE.STATEHASH and
// FENCE.SNAPSHOT included.
func TestCommandListsEveryDispatchedCommand(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	rc := dialRaw(t, addr)
	list := rc.do("COMMAND", "LIST")
	for _, c := range nativeCommands() {
		assert.Contains(t, list, "\r\n"+c.name+"\r\n")
	}
	info := rc.do("COMMAND", "INFO", "fence.statehash", "fence.snapshot", "fence.macquire")
	assert.Contains(t, info, "fence.statehash")
	assert.Contains(t, info, "fence.snapshot")
	assert.Contains(t, info, "+movablekeys", "a numkeys rule is reported as movable keys")
}
