package redisbridge

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/wire"
	"github.com/tidwall/match"
)

// Authentication, opt-in: with Config.Users or Config.RequirePass set, a
// connection must authenticate (AUTH, or HELLO ... AUTH) before anything but
// AUTH, HELLO, PING and QUIT is served, and each user may touch only the
// locks whose names match its pattern.
//
// Passwords are compared as SHA-256 digests in constant time; an unknown
// user is compared against a dummy digest, so the time taken does not tell
// whether a user exists. Each failed attempt is logged and answered only
// after authFailDelay, which holds up that connection (a client that opens
// many connections is bounded by MaxClients).
//
// Forwarding between nodes: a follower checks the client's permissions
// itself, then forwards over a connection authenticated as
// Config.ForwardUser (a user with pattern "*", the same on every node; with
// only RequirePass set it is "default"). The leader therefore trusts what a
// forwarding node sends, within that user's rights.

// User is one user: a name, the SHA-256 digest of its password, and the
// glob pattern (Redis's: * ? [abc]) of the lock names it may touch.
type User struct {
	Name    string
	Digest  [sha256.Size]byte
	Pattern string
	// Password is kept only when the file gave it in plain text; the node
	// needs it to authenticate its forwarding connections as this user.
	Password string
	// MaxLocks, if positive, bounds the locks held under Pattern (fencerd
	// turns it into a server.Quota, enforced by the leader); 0 is no limit.
	MaxLocks int
}

var (
	noAuth      = wire.Error{Code: wire.NoAuth, Text: "Authentication required."}
	noAuthHello = wire.Error{Code: wire.NoAuth, Text: "HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"}
	noPermKey   = wire.Error{Code: wire.NoPerm, Text: "No permissions to access a key"}
)

const authFailWait = 200 * time.Millisecond

// authFailDelay is how long a failed AUTH waits before it is answered.
var authFailDelay = authFailWait

// DefaultUser is the user AUTH with only a password, and RequirePass, name.
const DefaultUser = "default"

// NewUser returns a user with the given password in plain text.
func NewUser(name, password, pattern string) User {
	return User{Name: name, Digest: sha256.Sum256([]byte(password)), Pattern: pattern, Password: password}
}

// LoadUsers reads a users file: one user a line, three fields separated by
// spaces: name, password, lock-name pattern, and optionally a fourth,
// maxlocks=N, the most locks held under the pattern. A password written
// "sha256:<64 hex digits>" is the digest of the password (the node cannot
// forward as such a user). Blank lines and lines starting with # are
// skipped.
func LoadUsers(path string) ([]User, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("redisbridge: users: %w", err)
	}
	defer f.Close()
	var users []User
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 3 && len(fields) != 4 {
			return nil, fmt.Errorf("redisbridge: users: %s:%d: want 3 or 4 fields (user password pattern [maxlocks=N]), got %d", path, line, len(fields))
		}
		name, pass, pattern := fields[0], fields[1], fields[2]
		maxLocks := 0
		if len(fields) == 4 {
			v, ok := strings.CutPrefix(fields[3], "maxlocks=")
			n, err := strconv.Atoi(v)
			if !ok || err != nil || n <= 0 {
				return nil, fmt.Errorf("redisbridge: users: %s:%d: fourth field %q: want maxlocks=N with N positive", path, line, fields[3])
			}
			maxLocks = n
		}
		if seen[name] {
			return nil, fmt.Errorf("redisbridge: users: %s:%d: user %q given twice", path, line, name)
		}
		seen[name] = true
		u := NewUser(name, pass, pattern)
		u.MaxLocks = maxLocks
		if h, ok := strings.CutPrefix(pass, "sha256:"); ok {
			d, err := hex.DecodeString(h)
			if err != nil || len(d) != sha256.Size {
				return nil, fmt.Errorf("redisbridge: users: %s:%d: bad sha256 digest", path, line)
			}
			copy(u.Digest[:], d)
			u.Password = ""
		}
		users = append(users, u)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("redisbridge: users: %w", err)
	}
	return users, nil
}

// authRequired reports whether connections must authenticate.
func (b *Bridge) authRequired() bool { return len(b.users) > 0 }

// lookup returns the user name with password, or nil, in time that does
// not depend on whether the user exists.
func (b *Bridge) lookup(name, password []byte) *User { return lookupUser(b.users, name, password) }

// Credentials checks a name and a password against the users of a Config,
// as AUTH does (Config.Credentials); the web console logs its users in
// with it.
type Credentials struct{ users map[string]*User }

// Credentials returns the check of c's users (Users, and "default" with
// RequirePass), or an error if c has none or a bad table.
func (c *Config) Credentials() (*Credentials, error) {
	users, _, err := c.userTable()
	if err != nil {
		return nil, err
	}
	if len(users) == 0 {
		return nil, configError("Users", "no users and no RequirePass: nobody could log in")
	}
	return &Credentials{users: users}, nil
}

// Check returns the user name with password (its Name and Pattern; not its
// password), or false, in time that does not depend on whether the user
// exists.
func (c *Credentials) Check(name, password string) (User, bool) {
	u := lookupUser(c.users, []byte(name), []byte(password))
	if u == nil {
		return User{}, false
	}
	return User{Name: u.Name, Digest: u.Digest, Pattern: u.Pattern, MaxLocks: u.MaxLocks}, true
}

func lookupUser(users map[string]*User, name, password []byte) *User {
	d := sha256.Sum256(password)
	u, ok := users[string(name)]
	if !ok {
		var dummy [sha256.Size]byte
		subtle.ConstantTimeCompare(d[:], dummy[:])
		return nil
	}
	if subtle.ConstantTimeCompare(d[:], u.Digest[:]) != 1 {
		return nil
	}
	return u
}

// authenticate checks name and password for r's connection; on failure it
// logs, waits authFailDelay and answers WRONGPASS.
func (b *Bridge) authenticate(r *request, name, password []byte) bool {
	if u := b.lookup(name, password); u != nil {
		r.conn.user = u
		return true
	}
	b.log.Warn("authentication failed", "remote", r.c.RemoteAddr(), "user", truncate(name, 64))
	t := time.NewTimer(authFailDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-b.ctx.Done():
	}
	writeError(r.c, wrongPass)
	return false
}

// permission returns the error a command on st is refused with, or the
// zero Error.
//
// cmd is the command's entry, nil for a command the bridge does not have
// (refused before AUTH, as Redis does).
func (b *Bridge) permission(st *connState, cmd *command, name string, args [][]byte) wire.Error {
	if !b.authRequired() {
		return wire.Error{}
	}
	u := st.user
	if u == nil {
		if name == "hello" && !helloHasAuth(args) {
			return noAuthHello
		}
		if cmd == nil || cmd.flags&beforeAuth == 0 {
			return noAuth
		}
		return wire.Error{}
	}
	if u.Pattern == "*" {
		return wire.Error{}
	}
	if cmd == nil {
		return wire.Error{}
	}
	if cmd.needsAdmin(args) {
		return wire.Error{Code: wire.NoPerm, Text: fmt.Sprintf("User %s has no permissions to run the '%s' command", u.Name, name)}
	}
	for _, k := range cmd.keys.lockKeys(args) {
		if !match.Match(string(k), u.Pattern) {
			return noPermKey
		}
	}
	return wire.Error{}
}

func helloHasAuth(args [][]byte) bool {
	for _, a := range args {
		if strings.EqualFold(string(a), "auth") {
			return true
		}
	}
	return false
}

// userTable builds the users by name and the AUTH command the forwarder
// sends (nil without authentication), or reports a bad configuration.
func (c *Config) userTable() (map[string]*User, []byte, error) {
	if len(c.Users) == 0 && c.RequirePass == "" {
		if c.ForwardUser != "" {
			return nil, nil, configError("ForwardUser", "set without Users or RequirePass")
		}
		return nil, nil, nil
	}
	users := make(map[string]*User, len(c.Users)+1)
	for i := range c.Users {
		u := c.Users[i]
		if u.Name == "" || u.Pattern == "" {
			return nil, nil, configError("Users", "user %q needs a name and a pattern", u.Name)
		}
		if _, dup := users[u.Name]; dup {
			return nil, nil, configError("Users", "user %q given twice", u.Name)
		}
		users[u.Name] = &u
	}
	fwd := c.ForwardUser
	if c.RequirePass != "" {
		if _, dup := users[DefaultUser]; dup {
			return nil, nil, configError("RequirePass", "Users has a %q user too", DefaultUser)
		}
		u := NewUser(DefaultUser, c.RequirePass, "*")
		users[DefaultUser] = &u
		if fwd == "" {
			fwd = DefaultUser
		}
	}
	if fwd == "" {
		return nil, nil, configError("ForwardUser", "needed with Users, so that followers can forward to the leader")
	}
	u, ok := users[fwd]
	switch {
	case !ok:
		return nil, nil, configError("ForwardUser", "no user %q", fwd)
	case u.Pattern != "*" || u.Password == "":
		return nil, nil, configError("ForwardUser", "user %q needs pattern * and a plain-text password", fwd)
	}
	return users, resp.AppendCommand(nil, []byte("AUTH"), []byte(u.Name), []byte(u.Password)), nil
}
