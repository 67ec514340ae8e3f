package server

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// raftLogger is the hclog.Logger handed to raft: it writes raft's lines
// through the node's slog logger, so that fencerd has one log format, and
// demotes to INFO the WARNs raft logs on a healthy start and join, which
// are not the operator's to act on (benign, below). Every other WARN stays
// one. Lines below level (Config.RaftLogLevel) are dropped before the slog
// handler's own level applies.
type raftLogger struct {
	out     *slog.Logger
	name    string
	implied []any
	level   *atomic.Int32 // an hclog.Level, shared with the loggers derived from this one
	state   *raftLogState
}

// raftLogState is what the demotions remember, shared by all of one
// node's raft loggers.
type raftLogState struct {
	// elected is set by the first "heartbeat timeout reached": only the
	// first election of the process, with no leader ever known, is the
	// healthy start's.
	elected atomic.Bool
}

// newRaftLogger returns raft's logger, writing to out at level and above.
func newRaftLogger(out *slog.Logger, level hclog.Level) hclog.Logger {
	if level == hclog.NoLevel {
		level = hclog.Info // hclog's default
	}
	l := &raftLogger{out: out, name: "raft", level: new(atomic.Int32), state: new(raftLogState)}
	l.level.Store(int32(level))
	return l
}

// benign reports whether raft's WARN msg with args is one that a healthy
// cluster logs, so that fencerd logs it at INFO:
//
//   - "heartbeat timeout reached, starting election" with no leader known,
//     the first time: a node that starts has heard from no leader, and must
//     time out once to elect or find one. A timeout that names the leader
//     it lost, or a second one, stays WARN.
//   - on the first appends to a fresh joiner, whose log is empty: the
//     joiner's "failed to get previous log" with last-index 0, and the
//     leader's "appendEntries rejected, sending older logs" that walks its
//     next index back to 1. A follower with entries that refuses an append
//     stays WARN.
func (l *raftLogger) benign(msg string, args []any) bool {
	switch msg {
	case "heartbeat timeout reached, starting election":
		if arg(args, "last-leader-id") != "" || arg(args, "last-leader-addr") != "" {
			return false
		}
		return !l.state.elected.Swap(true)
	case "failed to get previous log":
		return arg(args, "last-index") == "0"
	case "appendEntries rejected, sending older logs":
		return arg(args, "next") == "1"
	}
	return false
}

// arg returns the value of key among hclog's alternating keys and values,
// formatted, or "" if there is none.
func arg(args []any, key string) string {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == key {
			return fmt.Sprint(args[i+1])
		}
	}
	return ""
}

// slogLevel maps hclog's levels onto slog's; trace is below debug.
func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// Log implements hclog.Logger.
func (l *raftLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	if level == hclog.Warn && l.benign(msg, args) {
		level = hclog.Info
	}
	min := hclog.Level(l.level.Load())
	if level < min || min == hclog.Off {
		return
	}
	sl := slogLevel(level)
	ctx := context.Background()
	if !l.out.Enabled(ctx, sl) {
		return
	}
	r := slog.NewRecord(time.Now(), sl, msg, 0)
	r.Add("module", l.name)
	r.Add(attrValues(l.implied)...)
	r.Add(attrValues(args)...)
	_ = l.out.Handler().Handle(ctx, r)
}

// attrValues returns hclog's alternating keys and values as slog takes
// them: each value as hclog's text format prints it (hclog.Fmt formatted, a
// Stringer by String, a struct by %v) unless it is a number, a string, a
// bool, a time or an error, which slog keeps as they are, so that a JSON
// line holds the text, not an empty object. raft's own "node" (its state)
// becomes "raft-node", as the node's ID holds that key.
func attrValues(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if i%2 == 0 {
			if a == "node" {
				a = "raft-node"
			}
			out[i] = a
			continue
		}
		switch v := a.(type) {
		case string, bool, int, int64, int32, uint, uint64, uint32, float64, time.Duration, time.Time, error, nil:
			out[i] = v
		case hclog.Format:
			if len(v) > 0 {
				f, _ := v[0].(string)
				out[i] = fmt.Sprintf(f, v[1:]...)
			}
		default:
			out[i] = fmt.Sprint(v)
		}
	}
	return out
}

// Trace implements hclog.Logger.
func (l *raftLogger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }

// Debug implements hclog.Logger.
func (l *raftLogger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }

// Info implements hclog.Logger.
func (l *raftLogger) Info(msg string, args ...any) { l.Log(hclog.Info, msg, args...) }

// Warn implements hclog.Logger.
func (l *raftLogger) Warn(msg string, args ...any) { l.Log(hclog.Warn, msg, args...) }

// Error implements hclog.Logger.
func (l *raftLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *raftLogger) enabled(level hclog.Level) bool {
	min := hclog.Level(l.level.Load())
	return min != hclog.Off && level >= min && l.out.Enabled(context.Background(), slogLevel(level))
}

// IsTrace implements hclog.Logger.
func (l *raftLogger) IsTrace() bool { return l.enabled(hclog.Trace) }

// IsDebug implements hclog.Logger.
func (l *raftLogger) IsDebug() bool { return l.enabled(hclog.Debug) }

// IsInfo implements hclog.Logger.
func (l *raftLogger) IsInfo() bool { return l.enabled(hclog.Info) }

// IsWarn implements hclog.Logger.
func (l *raftLogger) IsWarn() bool { return l.enabled(hclog.Warn) }

// IsError implements hclog.Logger.
func (l *raftLogger) IsError() bool { return l.enabled(hclog.Error) }

// ImpliedArgs implements hclog.Logger.
func (l *raftLogger) ImpliedArgs() []any { return l.implied }

// With implements hclog.Logger.
func (l *raftLogger) With(args ...any) hclog.Logger {
	c := *l
	c.implied = append(append([]any(nil), l.implied...), args...)
	return &c
}

// Name implements hclog.Logger.
func (l *raftLogger) Name() string { return l.name }

// Named implements hclog.Logger.
func (l *raftLogger) Named(name string) hclog.Logger {
	c := *l
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

// ResetNamed implements hclog.Logger.
func (l *raftLogger) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	return &c
}

// SetLevel implements hclog.Logger.
func (l *raftLogger) SetLevel(level hclog.Level) { l.level.Store(int32(level)) }

// GetLevel implements hclog.Logger.
func (l *raftLogger) GetLevel() hclog.Level { return hclog.Level(l.level.Load()) }

// StandardLogger implements hclog.Logger.
func (l *raftLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

// StandardWriter implements hclog.Logger: each line written is logged at
// INFO (or opts.ForceLevel).
func (l *raftLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return stdWriter{l, level}
}

type stdWriter struct {
	l     *raftLogger
	level hclog.Level
}

func (w stdWriter) Write(p []byte) (int, error) {
	w.l.Log(w.level, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
