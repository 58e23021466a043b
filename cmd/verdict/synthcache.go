package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/verdict-dev/verdict/internal/gguf"
)

// synthModel returns the path of a synthetic model of the given shape
// under dataDir/models, writing it first if it is not there yet.
func synthModel(dataDir, shape string) (string, error) {
	dir := filepath.Join(dataDir, "models")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("flag --data: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("verdict-synth-%s-seed1.gguf", shape))
	if _, err := gguf.Inspect(path, false); err == nil {
		return path, nil
	}
	slog.Info("writing a synthetic model (no --model given)", "shape", shape, "path", path)
	if err := gguf.Synth(path, gguf.SynthOptions{Shape: shape, Seed: 1}); err != nil {
		return "", err
	}
	return path, nil
}
