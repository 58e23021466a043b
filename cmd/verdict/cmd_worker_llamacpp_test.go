//go:build llamacpp

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/model"
	"github.com/verdict-dev/verdict/queue"
	"github.com/verdict-dev/verdict/queue/queuetest"
	"github.com/verdict-dev/verdict/router"
	"github.com/verdict-dev/verdict/sink"
)

// TestWorkerCommandSQS runs the real `verdict worker` binary with the real
// engine on a synthetic model against moto: configured only through
// VERDICT_* variables, it consumes an SQS queue, publishes to an SQS results
// queue, serves /metrics and exits 0 on SIGTERM.
func TestWorkerCommandSQS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	moto, err := queuetest.StartMoto()
	require.NoError(t, err)
	defer moto.Stop()
	work, err := moto.CreateQueue(ctx, "cli-work", queuetest.QueueOptions{MaxReceives: 5})
	require.NoError(t, err)
	results, err := moto.CreateQueue(ctx, "cli-results", queuetest.QueueOptions{})
	require.NoError(t, err)

	dir := t.TempDir()
	modelPath := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, model.Synth(modelPath, model.SynthOptions{Shape: "tiny", Seed: 1}))
	bin := filepath.Join(dir, "verdict")
	out, err := exec.Command("go", "build", "-tags", "llamacpp", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	cmd := exec.Command(bin, "worker", "--log-format", "json")
	cmd.Env = append(os.Environ(),
		"VERDICT_MODEL="+modelPath, "VERDICT_THREADS=2", "VERDICT_CTX=2048",
		"VERDICT_QUEUE=sqs", "VERDICT_QUEUE_URL="+work.URL, "VERDICT_SQS_ENDPOINT="+moto.Endpoint,
		"VERDICT_REGION=us-east-1", "VERDICT_RESULTS_QUEUE_URL="+results.URL,
		"VERDICT_WAIT=1s", "VERDICT_METRICS_ADDR=127.0.0.1:0",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	metricsAddr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "metrics" {
				metricsAddr <- line.Addr
			}
			if testing.Verbose() {
				t.Log(sc.Text())
			}
		}
	}()

	ac := moto.AWS()
	in, err := queue.NewSQS(ctx, queue.SQSConfig{URL: work.URL, Endpoint: moto.Endpoint, AWS: &ac})
	require.NoError(t, err)
	state := decision.TextState("The customer cannot log in after the password reset.")
	env := queue.Envelope{RequestID: "cli-1", SubmittedAt: time.Now().UTC(), Route: decision.RouteCPU,
		GroupKey: router.GroupKey(state), Format: queue.FormatSemIf, Decisions: []decision.Decision{
			{ID: "access", State: state, Question: "Is this about account access?", Options: []decision.Option{{ID: "yes", Description: "Yes."}, {ID: "no", Description: "No."}}},
			{ID: "urgent", State: state, Question: "Is this urgent?", Options: []decision.Option{{ID: "yes", Description: "Yes."}, {ID: "no", Description: "No."}}},
		}}
	body, err := env.Marshal()
	require.NoError(t, err)
	errs, err := in.Send(ctx, []queue.Outgoing{{Body: body}})
	require.NoError(t, err)
	require.NoError(t, errs[0])

	rq, err := queue.NewSQS(ctx, queue.SQSConfig{URL: results.URL, Endpoint: moto.Endpoint, AWS: &ac})
	require.NoError(t, err)
	got := map[string]sink.Record{}
	deadline := time.Now().Add(90 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		msgs, err := queuetest.Drain(ctx, rq, time.Second)
		require.NoError(t, err)
		for _, m := range msgs {
			var r sink.Record
			require.NoError(t, json.Unmarshal(m.Body, &r))
			got[r.Key()] = r
		}
	}
	require.Len(t, got, 2)
	for _, key := range []string{"cli-1/access", "cli-1/urgent"} {
		r := got[key]
		require.Equal(t, decision.StatusDecided, r.Status, key)
		require.NotNil(t, r.Result.Model)
		require.Len(t, r.Result.Probabilities, 2)
	}

	var addr string
	select {
	case addr = <-metricsAddr:
	case <-time.After(10 * time.Second):
		t.Fatal("no metrics address logged")
	}
	var mb []byte
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		require.NoError(t, err)
		mb, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(mb), `verdict_worker_decisions_total{status="decided"} 2`) {
			break
		}
	}
	require.Contains(t, string(mb), `verdict_worker_decisions_total{status="decided"} 2`)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "verdict worker exits 0 on SIGTERM")
	case <-time.After(30 * time.Second):
		t.Fatal("verdict worker did not exit after SIGTERM")
	}
}
