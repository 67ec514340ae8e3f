package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/fencerlock/fencer/internal/version"
	"github.com/fencerlock/fencer/server"
)

// readSnapshot reads and checks a --restore file before the node touches its
// data directory, so a bad file leaves the directory empty for another try.
func readSnapshot(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--restore: %w", err)
	}
	if _, _, err := fsm.ForNewCluster(data); err != nil {
		var fe *fsm.FormatError
		if errors.As(err, &fe) {
			// A snapshot saved from a cluster of a later build.
			return nil, fmt.Errorf("--restore %s: %w (this is fencer %s; docs/compatibility.md)", path, err, version.Version)
		}
		return nil, fmt.Errorf("--restore %s: %w", path, err)
	}
	return data, nil
}

// restoreSnapshot seeds the node's new cluster from snapshot before it
// serves anyone.
func restoreSnapshot(ctx context.Context, node *server.Node, snapshot []byte, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	info, err := node.RestoreSnapshot(ctx, snapshot)
	if err != nil {
		return fmt.Errorf("--restore: %w", err)
	}
	logger.Info("restored the snapshot; every new token exceeds the snapshot's", "locks", info.Locks, "max_token", info.MaxToken)
	return nil
}
