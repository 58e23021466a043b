package lambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/awstest"
	"github.com/verdict-dev/verdict/internal/gguf"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/lambda"
	"github.com/verdict-dev/verdict/worker"
)

// TestBootstrapUnderEmulator runs the real bootstrap binary under the AWS
// Lambda Runtime Interface Emulator, enqueueing into a FIFO queue of
// moto_server; then a worker drains the queue into the local results store:
// request in, result out.
func TestBootstrapUnderEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED in -short: starts moto_server and the Lambda emulator")
	}
	t.Parallel()
	rie := awstest.FindRIE(t)
	bootstrap := awstest.BuildBootstrap(t, "..", tempDir(t))

	moto, err := queuetest.StartMoto()
	require.NoError(t, err)
	t.Cleanup(moto.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tq, err := moto.CreateQueue(ctx, "frontdoor", queuetest.QueueOptions{FIFO: true, Visibility: 30 * time.Second})
	require.NoError(t, err)

	front := awstest.StartFrontDoor(t, rie, bootstrap,
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
		"VERDICT_CPU_QUEUE_URL="+tq.URL,
		"VERDICT_SQS_ENDPOINT="+moto.Endpoint,
		"VERDICT_API_KEYS="+testKey+"=acme",
		"VERDICT_RESULTS_LOCATION=sqs://results/{request_id}",
	)

	invokeRIE := func(ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, map[string]any) {
		t.Helper()
		out := front.Invoke(t, ev)
		var body map[string]any
		require.NoError(t, json.Unmarshal([]byte(out.Body), &body), out.Body)
		return out, body
	}

	resp, semif := invokeRIE(loadEvent(t, "httpapi-semif.json"))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Equal(t, "sqs://results/"+semif["request_id"].(string), semif["results"])
	// A client retry with the same Idempotency-Key: same id, and the FIFO
	// dedup id keeps it from being enqueued twice.
	resp, retry := invokeRIE(loadEvent(t, "httpapi-semif.json"))
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, semif["request_id"], retry["request_id"])

	resp, s1 := invokeRIE(loadEvent(t, "httpapi-systemone.json"))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)

	resp, bad := invokeRIE(loadEvent(t, "httpapi-invalid.json"))
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.NotEmpty(t, bad["fields"])
	resp, _ = invokeRIE(loadEvent(t, "httpapi-no-key.json"))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	visible, _, err := moto.Count(ctx, tq.URL)
	require.NoError(t, err)
	require.Equal(t, 2, visible, "one message per accepted request, none for the retry or the refused ones")

	// SQS failing (here: a queue that does not exist) is a 503 with
	// Retry-After, without SQS's error text.
	missing, err := queue.NewSQS(ctx, queue.SQSConfig{URL: moto.Endpoint + "/123456789012/no-such-queue.fifo", Endpoint: moto.Endpoint, AWS: ptr(moto.AWS())})
	require.NoError(t, err)
	down, err := lambda.New(lambda.Config{Queues: map[decision.Route]queue.Sender{decision.RouteCPU: missing}, APIKeys: map[string]string{testKey: "acme"}})
	require.NoError(t, err)
	resp, body := invoke(t, down, loadEvent(t, "httpapi-semif.json"))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "2", resp.Headers["Retry-After"])
	require.Equal(t, "unavailable", body["code"])
	require.NotContains(t, resp.Body, "NonExistentQueue")
	require.NotContains(t, resp.Body, "no-such-queue")

	// A worker drains the queue.
	sq, err := queue.NewSQS(ctx, queue.SQSConfig{URL: tq.URL, Endpoint: moto.Endpoint, AWS: ptr(moto.AWS())})
	require.NoError(t, err)
	store, err := results.OpenFile(filepath.Join(tempDir(t), "results.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	w, err := worker.New(worker.Config{Queue: sq, Scorer: newScorer(t), Sinks: []sink.Sink{store},
		Wait: time.Second, Visibility: 30 * time.Second, ShutdownTimeout: 10 * time.Second})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-runErr })

	require.Eventually(t, func() bool {
		n, err := store.Count(ctx)
		return err == nil && n == 4
	}, 90*time.Second, 200*time.Millisecond, "results of 1 + 3 decisions")

	rec, err := store.Get(ctx, semif["request_id"].(string), "support-route")
	require.NoError(t, err)
	require.Equal(t, "acme", rec.Record.Tenant)
	require.Equal(t, []string{"account_access", "billing", "sales"}, rec.Record.Result.OptionIDs)
	require.Len(t, rec.Record.Result.Probabilities, 3)
	require.Nil(t, rec.Record.Result.Error)
	recs, err := store.ByRequest(ctx, s1["request_id"].(string))
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for _, r := range recs {
		require.Equal(t, queue.FormatSystemOne, r.Record.Format)
		require.Equal(t, "jev-latest", r.Record.Model)
		require.Nil(t, r.Record.Result.Error)
		require.NotEqual(t, decision.StatusError, r.Record.Status)
	}
	stop()
	require.NoError(t, <-runErr)
	runErr <- nil
	visible, inFlight, err := moto.Count(ctx, tq.URL)
	require.NoError(t, err)
	require.Zero(t, visible+inFlight, "every message was deleted after its results were stored")
}

func ptr[T any](v T) *T { return &v }

// newScorer returns the real llama.cpp engine over a synthesized model in
// builds with cgo. In builds without it (CGO_ENABLED=0) the engine cannot
// run, and fakeScorer stands in for it.
func newScorer(t *testing.T) worker.Scorer {
	t.Helper()
	if !llamacpp.Available {
		t.Log("built without llama.cpp: scoring with fakeScorer")
		return fakeScorer{}
	}
	path := filepath.Join(tempDir(t), "tiny.gguf")
	require.NoError(t, gguf.Synth(path, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	e, err := llamacpp.New(llamacpp.Options{ModelPath: path, ContextSize: 2048, Threads: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// fakeScorer is a stand-in engine for builds without llama.cpp: it gives
// the first option probability 0.6 and shares the rest evenly.
type fakeScorer struct{}

func (fakeScorer) Score(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
	out := make([]decision.Result, len(ds))
	for i, d := range ds {
		n := len(d.Options)
		probs := make([]float64, n)
		for j := range probs {
			probs[j] = 0.4 / float64(n-1)
		}
		probs[0] = 0.6
		out[i] = decision.Result{ID: d.ID, OptionIDs: d.OptionIDs(), Probabilities: probs, OptionLogits: make([]float64, n),
			Chosen: d.Options[0].ID, Confidence: decision.Confidence(probs), Readout: fmt.Sprintf("fake scorer (%d options)", n)}
	}
	return out, nil
}

// TestBootstrapNeedsNoCgo checks what `make lambda` relies on: outside the
// standard library (whose cgo parts have pure-Go fallbacks), no dependency
// of the bootstrap has cgo files, even with cgo on;
// in particular the engine is not linked.
func TestBootstrapNeedsNoCgo(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc", "-f", "{{.ImportPath}} {{.Standard}} {{len .CgoFiles}}", "./cmd/bootstrap")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Greater(t, len(lines), 50)
	for _, line := range lines {
		f := strings.Fields(line)
		require.Len(t, f, 3, line)
		require.NotContains(t, f[0], "engine/llamacpp")
		if f[1] == "false" {
			require.Equal(t, "0", f[2], "%s has cgo files", f[0])
		}
	}
}
