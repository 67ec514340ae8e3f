package resp

import (
	"bufio"
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replies holds one reply of each shape the readers must frame.
var replies = []string{
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
	"*0\r\n",
	// Longer than a default bufio.Reader's buffer.
	"$5000\r\n" + strings.Repeat("x", 5000) + "\r\n",
}

func TestReadRawFramesOneReply(t *testing.T) {
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

// junk holds inputs that are not one reply.
var junk = []string{
	"?what\r\n",
	"$abc\r\n",
	"$3\r\nabcXY",
	"$5000\r\n" + strings.Repeat("x", 5000) + "XY",
	"*x\r\n",
	"+OK\n",
	"$-2\r\n",
	"*99999999999\r\n",
	":12a\r\n",
	"#x\r\n",
	"*2\r\n:1\r\n",
	"+" + strings.Repeat("a", 5000) + "\r\n",
}

func TestReadRawRejectsJunk(t *testing.T) {
	for _, in := range junk {
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

// A Reader parses what ReadValue parses, however the replies before it
// left the memory it reuses.
func TestReaderMatchesReadValue(t *testing.T) {
	var all bytes.Buffer
	for range 2 {
		for _, r := range replies {
			all.WriteString(r)
		}
	}
	want := bufio.NewReader(bytes.NewReader(all.Bytes()))
	rd := NewReader(bufio.NewReader(bytes.NewReader(all.Bytes())))
	for i := range 2 * len(replies) {
		w, err := ReadValue(want)
		require.NoError(t, err)
		got, err := rd.ReadValue()
		require.NoError(t, err, "reply %d", i)
		assert.Equal(t, w, *got, "reply %d", i)
	}
	_, err := rd.ReadValue()
	assert.ErrorIs(t, err, io.EOF)

	for _, in := range junk {
		_, err := NewReader(bufio.NewReader(strings.NewReader(in))).ReadValue()
		assert.Error(t, err, "%q", in)
	}
}

// What a caller keeps of a Reader's reply is its strings; they stay as
// they were when the Reader reuses the elements that held them.
func TestReaderStringsOutliveTheReply(t *testing.T) {
	rd := NewReader(bufio.NewReader(strings.NewReader("*2\r\n$2\r\nn1\r\n+lead\r\n*2\r\n$2\r\nn2\r\n+gone\r\n")))
	first, err := rd.ReadValue()
	require.NoError(t, err)
	name, role := first.Elems[0].Str, first.Elems[1].Str
	second, err := rd.ReadValue()
	require.NoError(t, err)
	assert.Equal(t, "n2", second.Elems[0].Str)
	assert.Equal(t, "gone", second.Elems[1].Str)
	assert.Equal(t, "n1", name)
	assert.Equal(t, "lead", role)
}

// repeat is an endless stream of one byte string.
type repeat struct {
	b   []byte
	off int
}

func (r *repeat) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m := copy(p[n:], r.b[r.off:])
		n += m
		r.off = (r.off + m) % len(r.b)
	}
	return n, nil
}

// A Reader allocates nothing for replies without text once it has seen
// one of each shape: the benchmark's client relies on it.
func TestReaderReusesMemory(t *testing.T) {
	rd := NewReader(bufio.NewReader(&repeat{b: []byte("*2\r\n:42\r\n:10000\r\n:1\r\n*2\r\n*1\r\n:1\r\n_\r\n$-1\r\n")}))
	read := func() {
		for _, want := range []Kind{Array, Integer, Array, BulkString} {
			v, err := rd.ReadValue()
			if err != nil || v.Kind != want {
				t.Fatalf("read %v, %v; want a %c", v, err, want)
			}
		}
	}
	read()
	assert.Zero(t, testing.AllocsPerRun(100, read))
}

// FuzzReader checks that a Reader, reusing memory across the replies in
// one input, reads what ReadValue reads.
func FuzzReader(f *testing.F) {
	f.Add([]byte("*2\r\n:7\r\n$2\r\nhi\r\n*1\r\n*1\r\n_\r\n"))
	f.Add([]byte("%1\r\n+a\r\n_\r\n*3\r\n:1\r\n:2\r\n:3\r\n:4\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		want := bufio.NewReader(bytes.NewReader(in))
		rd := NewReader(bufio.NewReader(bytes.NewReader(in)))
		for {
			w, werr := ReadValue(want)
			got, err := rd.ReadValue()
			if (werr == nil) != (err == nil) {
				t.Fatalf("ReadValue: %v, %v; Reader: %v, %v", w, werr, got, err)
			}
			if err != nil {
				return
			}
			if !reflect.DeepEqual(w, *got) {
				t.Fatalf("ReadValue: %v; Reader: %v", w, got)
			}
		}
	})
}

// The grant reply to FENCE.ACQUIRE, read by ReadValue and by a Reader.
func BenchmarkReadValue(b *testing.B) {
	br := bufio.NewReader(&repeat{b: []byte("*2\r\n:42\r\n:10000\r\n")})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadValue(br); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReaderReadValue(b *testing.B) {
	rd := NewReader(bufio.NewReader(&repeat{b: []byte("*2\r\n:42\r\n:10000\r\n")}))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rd.ReadValue(); err != nil {
			b.Fatal(err)
		}
	}
}
