package redisbridge

import (
	"time"

	"github.com/fencerlock/fencer/wire"
	"github.com/tidwall/redcon"
)

// Limits on what one client may send. Each is checked before a command is
// dispatched and answered with an error that leaves the connection open and
// the lock table untouched; only MaxClients refuses a connection outright.
//
// MaxBulkLen is checked after redcon has read the command: redcon's reader
// has no length limit of its own and buffers a bulk string as announced.
// MaxClients bounds how many such buffers can exist; IdleTimeout (when set)
// closes a connection that stops sending half way through one.

// errMaxClients is Redis's wording for a connection over maxclients.
var errMaxClients = errf("max number of clients reached")

// tooManyArgs and argTooLong answer a command over MaxArgs or MaxBulkLen,
// whether the guard or overLimit caught it.
func tooManyArgs(n, limit int) wire.Error {
	return errf("too many arguments: %d, at most %d per command", n, limit)
}

func argTooLong(n, limit int) wire.Error {
	return errf("argument too long: %d bytes, at most %d", n, limit)
}

// refuseClient tells a connection over MaxClients why it is closed, as Redis
// does, without waiting long for a client that does not read.
func (b *Bridge) refuseClient(c redcon.Conn) {
	nc := c.NetConn()
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write(errorLine(errMaxClients))
	b.log.Warn("connection refused: too many clients", "remote", c.RemoteAddr(), "max_clients", b.cfg.MaxClients)
}

// overLimit returns the error a command that breaks a limit is answered
// with, or the zero Error if it breaks none. It also counts the command's place in its
// read batch, so it must be called once per command.
func (b *Bridge) overLimit(c redcon.Conn, st *connState, args [][]byte) wire.Error {
	if st.batchLeft == 0 {
		st.batchPos = 0
	}
	st.batchPos++
	st.batchLeft = len(c.PeekPipeline())
	if st.batchPos > b.cfg.MaxPipeline {
		return errf("too many pipelined commands: at most %d per read are served, resend the rest", b.cfg.MaxPipeline)
	}
	if len(args) == 2 && string(args[0]) == overLimitCmd {
		return errf("%s", args[1]) // the guard dropped the command
	}
	if len(args) > b.cfg.MaxArgs {
		return tooManyArgs(len(args), b.cfg.MaxArgs)
	}
	for _, a := range args {
		if len(a) > b.cfg.MaxBulkLen {
			return argTooLong(len(a), b.cfg.MaxBulkLen)
		}
	}
	return wire.Error{}
}
