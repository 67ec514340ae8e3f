package resp

import (
	"bufio"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestErrorReplyCode(t *testing.T) {
	for in, want := range map[ErrorReply]string{
		"UNCERTAIN outcome unknown": "UNCERTAIN",
		"NOLEADER":                  "NOLEADER",
		"":                          "",
	} {
		assert.Equal(t, want, in.Code(), "ErrorReply(%q).Code()", in)
	}
}

// ReadPlain gives the shapes tests compare, and refuses what a RESP2
// connection must not receive.
func TestReadPlain(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     any
	}{
		{"simple string", "+OK\r\n", "OK"},
		{"error", "-UNCERTAIN outcome unknown\r\n", ErrorReply("UNCERTAIN outcome unknown")},
		{"integer", ":-3\r\n", int64(-3)},
		{"bulk string", "$5\r\nowner\r\n", "owner"},
		{"empty bulk string", "$0\r\n\r\n", ""},
		{"null bulk string", "$-1\r\n", nil},
		{"null array", "*-1\r\n", nil},
		{"grant", "*2\r\n:42\r\n:10000\r\n", []any{int64(42), int64(10000)}},
		{"status", "*3\r\n$2\r\nme\r\n:4\r\n:9979\r\n", []any{"me", int64(4), int64(9979)}},
		{"nested", "*2\r\n*1\r\n+a\r\n$-1\r\n", []any{[]any{"a"}, nil}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadPlain(bufio.NewReader(strings.NewReader(tt.in)))
			assert.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	for _, in := range []string{"_\r\n", "*1\r\n#t\r\n", "%1\r\n+a\r\n:1\r\n", "?\r\n", "$3\r\nab\r\n", "+OK\n"} {
		got, err := ReadPlain(bufio.NewReader(strings.NewReader(in)))
		assert.Error(t, err, "ReadPlain(%q) = %#v", in, got)
	}
}
