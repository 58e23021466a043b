package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/worker"
)

func TestWorkerFlagErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := map[string][]string{
		"flag --queue":                                        {"--queue", "kafka"},
		"flag --queue-url":                                    {"--queue", "sqs"},
		"flag --concurrency":                                  {"--concurrency", "0"},
		"flag --max-messages":                                 {"--max-messages", "11"},
		"flag --visibility":                                   {"--visibility", "10ms"},
		"flag --wait":                                         {"--wait", "30s"},
		"flag --wait: must be >= 0":                           {"--wait", "-1s"},
		"flag --shutdown-timeout: must be >= 0":               {"--shutdown-timeout", "-5s"},
		"flag --retry-base: must be >= 0":                     {"--retry-base", "-1ns"},
		"flag --retry-max: must be >= 0":                      {"--retry-max", "-1m"},
		"flag --retry-max: must be at most 12h":               {"--retry-max", "13h"},
		"flag --max-messages: must be >= 1":                   {"--max-messages", "0"},
		"flag --visibility: must be 1s..12h":                  {"--visibility", "0s"},
		"flag --webhook-secret":                               {"--data", dir, "--webhook-url", "https://hooks.example.com/x"},
		"flag --policy":                                       {"--data", dir, "--policy", filepath.Join(dir, "missing.yaml")},
		"no result sink":                                      {"--queue", "sqs", "--queue-url", "http://127.0.0.1:1/q", "--region", "us-east-1"},
		"flag --results-ttl: must be > 0":                     {"--queue", "sqs", "--queue-url", "http://127.0.0.1:1/q", "--region", "us-east-1", "--results-table", "t", "--results-ttl", "-1s"},
		`flag --pool: "tpu" is not a pool`:                    {"--data", dir, "--pool", "tpu"},
		"flag --escalate: needs --pool":                       {"--queue", "sqs", "--queue-url", "http://127.0.0.1:1/q", "--region", "us-east-1", "--escalate", "gpu=http://127.0.0.1:1/g"},
		`flag --escalate: "gpu" is not POOL=QUEUE`:            {"--data", dir, "--escalate", "gpu"},
		`flag --escalate: "tpu" is not a pool`:                {"--data", dir, "--escalate", "tpu=x"},
		"flag --escalate: cpu is this worker's own pool":      {"--data", dir, "--escalate", "cpu=cpu"},
		"flag --escalate: pool gpu is named twice":            {"--data", dir, "--escalate", "gpu=a,gpu=b"},
		`flag --escalate: gpu: "gpu" is not an SQS queue URL`: {"--queue", "sqs", "--queue-url", "http://127.0.0.1:1/q", "--region", "us-east-1", "--pool", "cpu", "--escalate", "gpu=gpu"},
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

// TestWorkerCascadeFlags: a local worker on the cpu queue takes its pool
// from the queue's name and sends escalations to the gpu queue of the
// same file; a policy escalating to a pool it has no queue for is refused
// with the clause's path.
func TestWorkerCascadeFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(pol, []byte("kinds:\n  route:\n    escalate: {below: 0.8, to: gpu}\n"), 0o644))
	build := func(args ...string) (worker.Config, error) {
		fs := newFlagSet("worker", "worker")
		var wf workerFlags
		wf.register(fs)
		require.NoError(t, parseFlags(fs, append([]string{"--data", dir, "--policy", pol}, args...)))
		var res resources
		t.Cleanup(res.close)
		return wf.build(context.Background(), &res)
	}
	cfg, err := build("--queue-name", "cpu", "--escalate", "gpu=gpu")
	require.NoError(t, err)
	require.Equal(t, decision.RouteCPU, cfg.Pool)
	require.Contains(t, cfg.Escalate, decision.RouteGPU)

	_, err = build("--queue-name", "cpu")
	require.ErrorContains(t, err, "flag --policy: policy: "+pol+": kinds.route.escalate.to: pool gpu is not run here (pools: cpu) (line 3) (this worker serves pool cpu and escalates to none)")
	cfg, err = build("--queue-name", "gpu")
	require.NoError(t, err, "the gpu worker is the clause's last stage")
	require.Equal(t, decision.RouteGPU, cfg.Pool)
	cfg, err = build("--queue-name", "work")
	require.NoError(t, err, "a worker that does not know its pool takes each message's")
	require.Equal(t, decision.RouteAuto, cfg.Pool)
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

// A duration flag's 0 means none (not the default): no long poll, no
// graceful wait, no release delay. Unset flags keep their defaults.
func TestWorkerFlagsZeroMeansNone(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want worker.Config
	}{
		{nil, worker.Config{Wait: worker.DefaultWait, ShutdownTimeout: worker.DefaultShutdownTimeout,
			RetryBase: worker.DefaultRetryBase, RetryMax: worker.DefaultRetryMax}},
		{[]string{"--wait", "0"}, worker.Config{Wait: worker.None, ShutdownTimeout: worker.DefaultShutdownTimeout,
			RetryBase: worker.DefaultRetryBase, RetryMax: worker.DefaultRetryMax}},
		{[]string{"--shutdown-timeout", "0s", "--retry-base", "0", "--retry-max", "0"}, worker.Config{Wait: worker.DefaultWait,
			ShutdownTimeout: worker.None, RetryBase: worker.None, RetryMax: worker.None}},
		{[]string{"--wait", "3s", "--retry-max", "1m"}, worker.Config{Wait: 3 * time.Second, ShutdownTimeout: worker.DefaultShutdownTimeout,
			RetryBase: worker.DefaultRetryBase, RetryMax: time.Minute}},
	}
	for _, tc := range cases {
		dir := t.TempDir()
		fs := newFlagSet("worker", "worker")
		var wf workerFlags
		wf.register(fs)
		require.NoError(t, parseFlags(fs, append([]string{"--data", dir}, tc.args...)))
		require.NoError(t, checkWorkerFlags(&wf), "%v", tc.args)
		var res resources
		cfg, err := wf.build(context.Background(), &res)
		require.NoError(t, err)
		res.close()
		got := worker.Config{Wait: cfg.Wait, ShutdownTimeout: cfg.ShutdownTimeout, RetryBase: cfg.RetryBase, RetryMax: cfg.RetryMax}
		require.Equal(t, tc.want, got, "%v", tc.args)
	}
}

// A results table that does not exist stops the worker at its start with
// one line naming the table and the action, before any model is loaded.
// The endpoint comes from AWS_ENDPOINT_URL alone, as the SDK reads it.
func TestWorkerRefusesAMissingResultsTable(t *testing.T) {
	moto, err := queuetest.StartMoto()
	require.NoError(t, err)
	t.Cleanup(moto.Stop)
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": moto.Endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"} {
		t.Setenv(k, v)
	}
	err = runWorker(context.Background(), []string{"--queue", "sqs", "--queue-url", moto.Endpoint + "/123456789012/q", "--region", "us-east-1",
		"--results-table", "no-such-table", "--model", filepath.Join(t.TempDir(), "never-loaded.gguf")})
	require.ErrorContains(t, err, "flag --results-table: ")
	require.ErrorContains(t, err, "results table no-such-table does not exist (dynamodb:DescribeTable)")
	require.NotContains(t, err.Error(), "\n")
}
