//go:build cgo

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/enginetest"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/gguf"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/router"
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
	require.NoError(t, gguf.Synth(modelPath, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	bin := buildVerdict(t)

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

// verdictProc is a verdict child process whose JSON log lines are kept.
type verdictProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	msgs chan logLine
	done chan error
}

type logLine struct{ Msg, Addr string }

// startVerdict starts bin with args and env (added to the test's
// environment) and kills it, if still running, when the test ends.
func startVerdict(t *testing.T, bin string, env []string, args ...string) *verdictProc {
	t.Helper()
	p := &verdictProc{msgs: make(chan logLine, 256), done: make(chan error, 1)}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.Write(sc.Bytes())
			p.logs.WriteByte('\n')
			p.mu.Unlock()
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				select {
				case p.msgs <- l:
				default:
				}
			}
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("%s logs:\n%s", args[0], p.Logs())
		}
	})
	return p
}

func (p *verdictProc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// waitMsg waits for the log line with message msg.
func (p *verdictProc) waitMsg(t *testing.T, msg string) logLine {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l := <-p.msgs:
			if l.Msg == msg {
				return l
			}
		case err := <-p.done:
			t.Fatalf("exited before logging %q: %v", msg, err)
		case <-deadline:
			t.Fatalf("no %q log line", msg)
		}
	}
}

// stop sends SIGTERM and requires exit status 0.
func (p *verdictProc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		require.NoError(t, err, "exit status after SIGTERM")
	case <-time.After(30 * time.Second):
		t.Fatal("did not exit after SIGTERM")
	}
}

// TestWorkerCommandSageMaker runs the real `verdict worker` binary with
// --engine sagemaker (configured only through VERDICT_* variables, no
// model) against the real `verdict serve` binary on a tiny synthetic model
// as the SageMaker endpoint: local queue in, local results store out. The
// stored probabilities equal the engine's own for the same decisions.
func TestWorkerCommandSageMaker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	modelPath := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, gguf.Synth(modelPath, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	bin := buildVerdict(t)

	serve := startVerdict(t, bin, nil, "serve", "--addr", "127.0.0.1:0", "--model", modelPath, "--threads", "2", "--ctx", "4096", "--log-format", "json")
	url := "http://" + serve.waitMsg(t, "listening").Addr
	serve.waitMsg(t, "model loaded")

	data := filepath.Join(dir, "data")
	worker := startVerdict(t, bin, []string{
		"VERDICT_ENGINE=sagemaker", "VERDICT_SAGEMAKER_ENDPOINT=local", "VERDICT_SAGEMAKER_URL=" + url,
		"VERDICT_SAGEMAKER_MAX_ATTEMPTS=3", "VERDICT_SAGEMAKER_CONCURRENCY=1", "VERDICT_SAGEMAKER_MAX_ELAPSED=10s",
		"VERDICT_DATA=" + data, "VERDICT_WAIT=1s", "VERDICT_REGION=us-east-1", "VERDICT_LOG_FORMAT=json",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	}, "worker")
	worker.waitMsg(t, "scoring on a SageMaker endpoint")
	worker.waitMsg(t, "worker started")

	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(data, "queue.db"), Name: "cpu"})
	require.NoError(t, err)
	defer q.Close()
	shared := decision.TextState("The customer cannot log in after the password reset.")
	other := decision.TextState("An invoice was charged twice.")
	yesNo := []decision.Option{{ID: "yes", Description: "Yes."}, {ID: "no", Description: "No."}}
	ds := []decision.Decision{
		{ID: "access", State: shared, Question: "Is this about account access?", Options: yesNo},
		{ID: "urgent", State: shared, Question: "Is this urgent?", Options: yesNo},
		{ID: "billing", State: other, Question: "Is this billing?", Options: yesNo},
	}
	env := queue.Envelope{RequestID: "sm-1", SubmittedAt: time.Now().UTC(), Route: decision.RouteCPU,
		GroupKey: router.GroupKey(shared), Format: queue.FormatSemIf, Decisions: ds}
	body, err := env.Marshal()
	require.NoError(t, err)
	errs, err := q.Send(ctx, []queue.Outgoing{{Body: body}})
	require.NoError(t, err)
	require.NoError(t, errs[0])

	st, err := results.OpenFile(filepath.Join(data, "results.db"))
	require.NoError(t, err)
	defer st.Close()
	var got []results.Stored
	require.Eventually(t, func() bool {
		got, err = st.ByRequest(ctx, "sm-1")
		require.NoError(t, err)
		return len(got) == len(ds)
	}, 60*time.Second, 100*time.Millisecond)

	eng, err := llamacpp.New(llamacpp.Options{ModelPath: modelPath, ContextSize: 4096})
	require.NoError(t, err)
	defer eng.Close()
	// The engine's own answers, one call per state as the endpoint got
	// them (one request at a time: VERDICT_SAGEMAKER_CONCURRENCY=1).
	direct, err := eng.Score(ctx, ds[:2])
	require.NoError(t, err)
	d2, err := eng.Score(ctx, ds[2:])
	require.NoError(t, err)
	direct = append(direct, d2...)
	byID := map[string]sink.Record{}
	for _, g := range got {
		byID[g.Record.DecisionID] = g.Record
	}
	for i, d := range ds {
		r, ok := byID[d.ID]
		require.True(t, ok, d.ID)
		require.Equal(t, decision.StatusDecided, r.Status, d.ID)
		require.Len(t, r.Result.Probabilities, 2, d.ID)
		for j := range direct[i].Probabilities {
			require.InDelta(t, direct[i].Probabilities[j], r.Result.Probabilities[j], enginetest.ProbTol(1e-5), d.ID) // batch composition: rounding only
		}
		require.NotNil(t, r.Result.Model, d.ID)
		require.Equal(t, eng.Identity().SHA256, r.Result.Model.SHA256, d.ID)
	}

	worker.stop(t)
	serve.stop(t)
	require.NotContains(t, worker.Logs(), "model loaded", "the worker loads no model")
}
