package redisbridge

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
)

// Limits on a reply read from another node; a reply over them is corrupt.
const (
	maxReplyBulk     = 512 << 20
	maxReplyElements = 1 << 24
	maxReplyDepth    = 32
)

// errBadReply means a node sent bytes that are not one RESP reply.
var errBadReply = errors.New("redisbridge: malformed reply from leader")

// readReply reads exactly one RESP2 or RESP3 reply from r and returns its raw
// bytes, so it can be relayed unchanged to a client.
func readReply(r *bufio.Reader) ([]byte, error) {
	var out []byte
	err := readValue(r, &out, 0)
	return out, err
}

func readValue(r *bufio.Reader, out *[]byte, depth int) error {
	if depth > maxReplyDepth {
		return fmt.Errorf("%w: nested deeper than %d", errBadReply, maxReplyDepth)
	}
	line, err := readLine(r)
	if err != nil {
		return err
	}
	*out = append(*out, line...)
	if len(line) < 3 {
		return fmt.Errorf("%w: %q", errBadReply, line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return nil
	case '$', '!', '=':
		n, err := strconv.Atoi(string(body))
		if err != nil || n < -1 || n > maxReplyBulk {
			return fmt.Errorf("%w: bulk length %q", errBadReply, body)
		}
		if n == -1 {
			return nil
		}
		// Grow as bytes arrive: a declared length allocates nothing by itself.
		var chunk [4096]byte
		for left := n + 2; left > 0; {
			m, err := r.Read(chunk[:min(left, len(chunk))])
			*out = append(*out, chunk[:m]...)
			left -= m
			if err != nil {
				return err
			}
		}
		if (*out)[len(*out)-2] != '\r' || (*out)[len(*out)-1] != '\n' {
			return fmt.Errorf("%w: bulk not terminated", errBadReply)
		}
		return nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(string(body))
		if err != nil || n < -1 || n > maxReplyElements {
			return fmt.Errorf("%w: aggregate length %q", errBadReply, body)
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			if err := readValue(r, out, depth+1); err != nil {
				return err
			}
		}
		if line[0] == '|' {
			// An attribute precedes the value it describes.
			return readValue(r, out, depth+1)
		}
		return nil
	}
	return fmt.Errorf("%w: unknown type %q", errBadReply, line[0])
}

// readLine reads up to and including "\r\n".
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line too long", errBadReply)
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: line not terminated by CRLF", errBadReply)
	}
	return append([]byte(nil), line...), nil
}
