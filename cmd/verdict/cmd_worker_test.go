package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

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
	sm := func(args ...string) []string {
		return append([]string{"--data", dir, "--engine", "sagemaker", "--sagemaker-endpoint", "ep"}, args...)
	}
	engineCases := map[string][]string{
		"flag --engine: bad value":                                     {"--data", dir, "--engine", "tpu"},
		"flag --sagemaker-endpoint: required with --engine sagemaker":  {"--data", dir, "--engine", "sagemaker"},
		"flag --sagemaker-endpoint: only used with --engine sagemaker": {"--data", dir, "--sagemaker-endpoint", "ep"},
		"flag --sagemaker-url: only used":                              {"--data", dir, "--sagemaker-url", "http://127.0.0.1:8080"},
		"flag --sagemaker-url: must be an http(s) URL":                 sm("--sagemaker-url", "127.0.0.1:8080"),
		"flag --sagemaker-max-attempts":                                sm("--sagemaker-max-attempts", "0"),
		"flag --sagemaker-max-elapsed":                                 sm("--sagemaker-max-elapsed", "0s"),
		"flag --sagemaker-attempt-timeout":                             sm("--sagemaker-attempt-timeout", "-1s"),
		"flag --sagemaker-max-batch":                                   sm("--sagemaker-max-batch", "0"),
		"flag --sagemaker-concurrency":                                 sm("--sagemaker-concurrency", "0"),
	}
	for want, args := range engineCases {
		cases[want] = args
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

// TestWorkerSageMakerLoadsNoModel: with --engine sagemaker the worker
// starts without any model (none under /opt/ml/model, no --model) and
// stops cleanly when its context ends.
func TestWorkerSageMakerLoadsNoModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runWorker(ctx, []string{"--data", dir, "--engine", "sagemaker", "--sagemaker-endpoint", "ep",
			"--sagemaker-url", "http://127.0.0.1:1", "--region", "us-east-1", "--wait", "0s", "--log-level", "error"})
	}()
	select {
	case err := <-done:
		t.Fatalf("the worker ended before it was stopped: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop")
	}
	require.FileExists(t, filepath.Join(dir, "queue.db"))
	// Everything opened was closed: SQLite removes a file's -wal journal
	// when its last connection closes.
	require.NoFileExists(t, filepath.Join(dir, "queue.db-wal"), "the local queue was not closed")
	require.NoFileExists(t, filepath.Join(dir, "results.db-wal"), "the results store was not closed")
}
