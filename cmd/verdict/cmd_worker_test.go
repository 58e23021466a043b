package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWorkerFlagErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := map[string][]string{
		"flag --queue":          {"--queue", "kafka"},
		"flag --queue-url":      {"--queue", "sqs"},
		"flag --concurrency":    {"--concurrency", "0"},
		"flag --max-messages":   {"--max-messages", "11"},
		"flag --visibility":     {"--visibility", "10ms"},
		"flag --wait":           {"--wait", "30s"},
		"flag --webhook-secret": {"--data", dir, "--webhook-url", "https://hooks.example.com/x"},
		"flag --policy":         {"--data", dir, "--policy", filepath.Join(dir, "missing.yaml")},
		"no result sink":        {"--queue", "sqs", "--queue-url", "http://127.0.0.1:1/q", "--region", "us-east-1"},
	}
	for want, args := range cases {
		err := runWorker(context.Background(), args)
		require.ErrorContains(t, err, want, "%v", args)
	}
}

func TestWorkerFlagsBuildLocal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fs := newFlagSet("worker", "worker")
	var wf workerFlags
	wf.register(fs)
	require.NoError(t, parseFlags(fs, []string{"--data", dir, "--queue-name", "gpu", "--max-receives", "7"}))
	var res resources
	defer res.close()
	cfg, err := wf.build(context.Background(), &res)
	require.NoError(t, err)
	require.NotNil(t, cfg.Queue)
	require.Len(t, cfg.Sinks, 1)
	require.Equal(t, "store", cfg.Sinks[0].Name())
	require.FileExists(t, filepath.Join(dir, "queue.db"))
	require.FileExists(t, filepath.Join(dir, "results.db"))
}
