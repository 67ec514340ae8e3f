package redisbridge

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// joinRetry is the pause between rounds of join attempts.
const joinRetry = time.Second

// JoinCluster asks the cluster reachable at any of addrs (client addresses
// of existing members) to add this node, with FENCE.JOIN, until one accepts
// or ctx ends. Any member will do: a follower forwards the join to the
// leader. Joining is idempotent, so retrying after an unknown outcome is
// safe.
func JoinCluster(ctx context.Context, addrs []string, id, raftAddr, clientAddr string, log *slog.Logger) error {
	return JoinClusterAs(ctx, addrs, id, raftAddr, clientAddr, "", "", nil, log)
}

// JoinClusterAs is JoinCluster on a cluster that requires authentication:
// it authenticates as user (a user with pattern "*") first. An empty user
// sends no AUTH. A non-nil tlsCfg connects over TLS.
func JoinClusterAs(ctx context.Context, addrs []string, id, raftAddr, clientAddr, user, password string, tlsCfg *tls.Config, log *slog.Logger) error {
	cmd := resp.AppendCommand(nil, []byte("FENCE.JOIN"), []byte(id), []byte(raftAddr), []byte(clientAddr))
	if user != "" {
		cmd = append(resp.AppendCommand(nil, []byte("AUTH"), []byte(user), []byte(password)), cmd...)
	}
	for {
		for _, addr := range addrs {
			err := joinOnce(ctx, addr, cmd, tlsCfg)
			if err == nil {
				log.Info("joined the cluster", "via", addr)
				return nil
			}
			log.Warn("join attempt failed", "via", addr, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisbridge: join: %w", ctx.Err())
		case <-time.After(joinRetry):
		}
	}
}

func joinOnce(ctx context.Context, addr string, cmd []byte, tlsCfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := dialNode(ctx, addr, tlsCfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	if _, err := conn.Write(cmd); err != nil {
		return err
	}
	rd := bufio.NewReader(conn)
	reply, err := resp.ReadRaw(rd)
	if err != nil {
		return err
	}
	if bytes.HasPrefix(cmd, []byte("*3\r\n$4\r\nAUTH")) && string(reply) == "+OK\r\n" {
		// That was AUTH's reply; the join's follows.
		if reply, err = resp.ReadRaw(rd); err != nil {
			return err
		}
	}
	if s := string(reply); s != "+OK\r\n" {
		return fmt.Errorf("%s", strings.TrimSpace(strings.TrimPrefix(s, "-")))
	}
	return nil
}
