package resp

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadRawFramesOneReply(t *testing.T) {
	replies := []string{
		"+OK\r\n",
		"-ERR no\r\n",
		":42\r\n",
		"$-1\r\n",
		"$5\r\nhello\r\n",
		"$0\r\n\r\n",
		"*-1\r\n",
		"*2\r\n:7\r\n:10000\r\n",
		"*3\r\n$2\r\nme\r\n:4\r\n:9979\r\n",
		"*2\r\n*1\r\n+a\r\n$3\r\nb\r\n\r\n",
		"_\r\n",
		"%2\r\n+server\r\n+fencer\r\n+proto\r\n:3\r\n",
		"~1\r\n#t\r\n",
		"|1\r\n+key\r\n+val\r\n:5\r\n",
		"=8\r\ntxt:abcd\r\n",
	}
	var all bytes.Buffer
	for _, r := range replies {
		all.WriteString(r)
	}
	br := bufio.NewReader(&all)
	for _, want := range replies {
		got, err := ReadRaw(br)
		require.NoError(t, err, want)
		assert.Equal(t, want, string(got))
	}
	_, err := ReadRaw(br)
	assert.ErrorIs(t, err, io.EOF)
}

func TestReadRawRejectsJunk(t *testing.T) {
	for _, in := range []string{
		"?what\r\n",
		"$abc\r\n",
		"$3\r\nabcXY",
		"*x\r\n",
		"+OK\n",
		"$-2\r\n",
		"*99999999999\r\n",
	} {
		_, err := ReadRaw(bufio.NewReader(bytes.NewBufferString(in)))
		assert.Error(t, err, "%q", in)
	}
}

// FuzzReadRaw checks that no input panics the reply reader, and that an
// accepted reply is a prefix of the input.
func FuzzReadRaw(f *testing.F) {
	f.Add([]byte("*2\r\n:7\r\n$2\r\nhi\r\n"))
	f.Add([]byte("%1\r\n+a\r\n_\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := ReadRaw(bufio.NewReader(bytes.NewReader(in)))
		if err == nil && !bytes.HasPrefix(in, got) {
			t.Fatalf("reply %q is not a prefix of %q", got, in)
		}
	})
}

// ReadValue parses what ReadRaw frames.
func TestReadValue(t *testing.T) {
	v, err := ReadValue(bufio.NewReader(bytes.NewBufferString("*3\r\n$2\r\nme\r\n:4\r\n_\r\n")))
	require.NoError(t, err)
	assert.Equal(t, Value{Kind: Array, Elems: []Value{{Kind: BulkString, Str: "me"}, {Kind: Integer, Int: 4}, {Kind: Null, IsNull: true}}}, v)
	v, err = ReadValue(bufio.NewReader(bytes.NewBufferString("%1\r\n+a\r\n#t\r\n")))
	require.NoError(t, err)
	assert.Equal(t, Value{Kind: Map, Elems: []Value{{Kind: SimpleString, Str: "a"}, {Kind: Boolean, Int: 1}}}, v)
	v, err = ReadValue(bufio.NewReader(bytes.NewBufferString("$-1\r\n")))
	require.NoError(t, err)
	assert.True(t, v.IsNull)
	assert.Equal(t, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", string(Command("GET", "k")))
}
