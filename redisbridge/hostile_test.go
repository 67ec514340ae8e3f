package redisbridge

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sendRaw dials addr, sends raw as it is, and returns the connection, which
// is closed when the test ends, and a reader of its replies. Everything
// must be done within 10 s.
func sendRaw(t *testing.T, addr, raw string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = c.Write([]byte(raw))
	require.NoError(t, err)
	return c, bufio.NewReader(c)
}

// Malformed RESP gets a protocol error and the connection is closed; the
// node keeps serving everyone else. Each case runs over a raw TCP connection
// against a real node and bridge.
func TestHostileInput(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	keeper := dialRaw(t, addr)
	require.Equal(t, "+OK\r\n", keeper.do("SET", "kept", "v", "NX", "PX", "60000"))

	cases := []struct{ name, send, reply string }{
		{"bad count", "*x\r\n", "invalid multibulk length"},
		{"negative count", "*-5\r\n", "invalid multibulk length"},
		{"huge count", "*99999999999\r\n", "invalid multibulk length"},
		{"count over Redis's bound", "*1048577\r\n", "invalid multibulk length"},
		{"bad length", "*1\r\n$abc\r\n", "invalid bulk length"},
		{"negative length", "*1\r\n$-2\r\n", "invalid bulk length"},
		// redcon v1.6.2 overflows on this length and panics: the process died.
		{"overflowing length", "*1\r\n$9223372036854775800\r\nxx\r\n", "invalid bulk length"},
		{"huge length", "*1\r\n$99999999999999999999\r\n", "invalid bulk length"},
		{"length over Redis's bound", "*1\r\n$536870913\r\n", "invalid bulk length"},
		{"missing dollar", "*1\r\n:4\r\nPING\r\n", "expected '$', got ':'"},
		{"short bulk", "*1\r\n$2\r\nPING\r\n", "invalid bulk length"},
		{"header without CR", "*1\n", "invalid multibulk length"},
		{"binary junk", "*\x00\xff\xfe\r\n", "invalid multibulk length"},
		{"inline too long", strings.Repeat("A", 70<<10), "too big inline request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, rd := sendRaw(t, addr, tc.send)
			reply, err := resp.ReadRaw(rd)
			require.NoError(t, err)
			assert.Equal(t, "-ERR Protocol error: "+tc.reply+"\r\n", string(reply))
			assertClosed(t, c)
			assert.Equal(t, "$1\r\nv\r\n", keeper.do("GET", "kept"), "others are served, data intact")
		})
	}
}

// An HTTP request is an inline command Redis does not know: it is answered
// with errors, and the connection is closed once the client stops sending
// (here, by the client; Redis closes on "Host:" and "POST", fencer need not).
func TestHTTPRequestOnTheRESPPort(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	_, rd := sendRaw(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	reply, err := resp.ReadRaw(rd)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(reply), "-ERR"), "%q", reply)
	assert.Equal(t, "+PONG\r\n", dialRaw(t, addr).do("PING"))
}

// Commands before the malformed one are answered first, in order.
func TestProtocolErrorAfterGoodCommands(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	c, rd := sendRaw(t, addr, "*1\r\n$4\r\nPING\r\nPING\r\n*1\r\n$x\r\n")
	for _, want := range []string{"+PONG\r\n", "+PONG\r\n", "-ERR Protocol error: invalid bulk length\r\n"} {
		reply, err := resp.ReadRaw(rd)
		require.NoError(t, err)
		assert.Equal(t, want, string(reply))
	}
	assertClosed(t, c)
}
