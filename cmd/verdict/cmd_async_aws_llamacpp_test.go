//go:build cgo

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/enginetest"
	"github.com/verdict-dev/verdict/internal/awstest"
	"github.com/verdict-dev/verdict/internal/gguf"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

// TestAsyncOnAWSEndToEnd drives the AWS shape with its real parts: the
// bootstrap binary under the Lambda Runtime Interface Emulator and the
// `verdict worker` binary on the tiny model, both pointed at moto_server
// (SQS and DynamoDB) by AWS_ENDPOINT_URL alone. Requests go POST → 202 →
// GET until done; the worker is killed -9 after the first results and a
// new one finishes the rest. Each decision ends with exactly one record,
// equal to `verdict score` of the same decision, and another tenant's key
// finds nothing.
func TestAsyncOnAWSEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED in -short: starts moto_server, the Lambda emulator and the worker")
	}
	t.Parallel()
	rie := awstest.FindRIE(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	moto, err := queuetest.StartMoto()
	require.NoError(t, err)
	t.Cleanup(moto.Stop)
	work, err := moto.CreateQueue(ctx, "async-work", queuetest.QueueOptions{MaxReceives: 5, Visibility: 30 * time.Second})
	require.NoError(t, err)
	ddb := dynamodb.NewFromConfig(moto.AWS(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	require.NoError(t, results.CreateTable(ctx, ddb, "verdict-results"))

	dir := t.TempDir()
	modelPath := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, gguf.Synth(modelPath, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	bin := buildVerdict(t)
	bootstrap := awstest.BuildBootstrap(t, "../..", dir)
	awsEnv := []string{"AWS_ENDPOINT_URL=" + moto.Endpoint, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}

	front := awstest.StartFrontDoor(t, rie, bootstrap, append(awsEnv, "VERDICT_CPU_QUEUE_URL="+work.URL,
		"VERDICT_RESULTS_TABLE=verdict-results", "VERDICT_API_KEYS=key-acme-0123456789=acme,key-globex-0123456789=globex")...)
	call := func(method, path, query, key, body string) (int, []byte) {
		t.Helper()
		ev := events.APIGatewayV2HTTPRequest{RawPath: path, RawQueryString: query, Body: body,
			Headers: map[string]string{"content-type": "application/json", "x-api-key": key}}
		ev.RequestContext.HTTP.Method = method
		out := front.Invoke(t, ev)
		return out.StatusCode, []byte(out.Body)
	}

	// Requests of four decisions each, two states per request.
	var lines []string
	var reqIDs []string
	for r := range 6 {
		var ds []string
		for d := range 4 {
			line := fmt.Sprintf(`{"id":"r%d-d%d","state":"Ticket %d: the invoice for order %d was charged twice.","question":"Which team handles it?","options":[{"id":"billing","description":"Billing."},{"id":"technical","description":"Technical."},{"id":"other","description":"Other."}]}`, r, d, r*2+d/2, r)
			ds = append(ds, line)
			lines = append(lines, line)
		}
		status, body := call("POST", "/v1/decisions", "", "key-acme-0123456789", `{"decisions":[`+strings.Join(ds, ",")+`]}`)
		require.Equal(t, http.StatusAccepted, status, "%s", body)
		var acc struct {
			RequestID string `json:"request_id"`
			Results   string `json:"results"`
		}
		require.NoError(t, json.Unmarshal(body, &acc))
		require.Equal(t, "/v1/requests/"+acc.RequestID, acc.Results, "the 202 points at the lookup")
		reqIDs = append(reqIDs, acc.RequestID)
	}
	lookup := func(id, key string) (int, results.Request) {
		t.Helper()
		status, body := call("GET", "/v1/requests/"+id, "", key, "")
		var st results.Request
		if status == http.StatusOK {
			require.NoError(t, json.Unmarshal(body, &st), "%s", body)
		}
		return status, st
	}
	status, st := lookup(reqIDs[0], "key-acme-0123456789")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, results.StatusQueued, st.Status)
	require.Equal(t, 4, st.Total)

	startWorker := func() *exec.Cmd {
		cmd := exec.Command(bin, "worker", "--log-format", "json")
		cmd.Env = append(os.Environ(), awsEnv...)
		cmd.Env = append(cmd.Env, "VERDICT_MODEL="+modelPath, "VERDICT_THREADS=1", "VERDICT_CTX=2048",
			"VERDICT_QUEUE=sqs", "VERDICT_QUEUE_URL="+work.URL, "VERDICT_RESULTS_TABLE=verdict-results",
			"VERDICT_WAIT=1s", "VERDICT_VISIBILITY=5s", "VERDICT_MAX_MESSAGES=1", "VERDICT_CONCURRENCY=1")
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("worker:\n%s", log.String())
			}
		})
		return cmd
	}
	doneCount := func() int {
		n := 0
		for _, id := range reqIDs {
			_, st := lookup(id, "key-acme-0123456789")
			n += st.Done
		}
		return n
	}

	// The first worker is killed -9 once some results are stored and
	// before all are.
	first := startWorker()
	require.Eventually(t, func() bool { return doneCount() > 0 }, 4*time.Minute, 200*time.Millisecond, "no result stored")
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	require.Less(t, doneCount(), 24, "killed before the end")

	startWorker()
	require.Eventually(t, func() bool { return doneCount() == 24 }, 4*time.Minute, 500*time.Millisecond, "not every decision finished")

	// `verdict score` of the same decisions.
	score := exec.Command(bin, "score", "--model", modelPath, "--threads", "1", "--ctx", "2048")
	score.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := score.Output()
	require.NoError(t, err)
	want := map[string]decision.Result{}
	for _, r := range scoreLines(t, out) {
		want[r.ID] = r
	}
	require.Len(t, want, 24)

	for _, id := range reqIDs {
		status, st := lookup(id, "key-acme-0123456789")
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, results.StatusDone, st.Status)
		seen := map[string]bool{}
		for _, d := range st.Decisions {
			require.False(t, seen[d.ID], "decision %s listed twice", d.ID)
			seen[d.ID] = true
			var rec sink.Record
			require.NoError(t, json.Unmarshal(d.Record, &rec))
			require.Equal(t, decision.StatusDecided, rec.Status, "%s", d.Record)
			w := want[d.ID]
			require.Equal(t, w.OptionIDs, rec.Result.OptionIDs)
			for i := range w.Probabilities {
				require.InDelta(t, w.Probabilities[i], rec.Result.Probabilities[i], enginetest.ProbTol(1e-3), d.ID)
			}
		}
		require.Len(t, seen, 4)

		// Another tenant's key finds nothing, by request or by decision.
		status, _ = lookup(id, "key-globex-0123456789")
		require.Equal(t, http.StatusNotFound, status)
		status, _ = call("GET", "/v1/decisions/"+st.Decisions[0].ID, "request_id="+id, "key-globex-0123456789", "")
		require.Equal(t, http.StatusNotFound, status)
	}
	status, body := call("GET", "/v1/decisions/r0-d1", "", "key-acme-0123456789", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Contains(t, string(body), `"status":"done"`)
	// The true answer for a published decision goes into the table.
	status, body = call("POST", "/v1/decisions/r0-d1/feedback", "request_id="+reqIDs[0], "key-acme-0123456789", `{"option":"technical","source":"e2e"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	status, body = call("POST", "/v1/decisions/r0-d1/feedback", "request_id="+reqIDs[0], "key-globex-0123456789", `{"option":"technical"}`)
	require.Equal(t, http.StatusNotFound, status, "%s", body)
	status, body = call("GET", "/v1/reviews", "", "key-acme-0123456789", "")
	require.Equal(t, http.StatusForbidden, status, "%s", body)
	var labeled int
	dyn, err := results.NewDynamo(results.DynamoConfig{Table: "verdict-results", Client: ddb})
	require.NoError(t, err)
	require.NoError(t, dyn.EachLabeled(ctx, results.LabelFilter{Tenant: "acme"}, func(l results.Labeled) error {
		require.Equal(t, "technical", l.Label.Option)
		labeled++
		return nil
	}))
	require.Equal(t, 1, labeled)

	status, body = call("GET", "/v1/requests/"+strings.Repeat("x", 600), "", "key-acme-0123456789", "")
	require.Equal(t, http.StatusBadRequest, status, "%s", body)
	require.Contains(t, string(body), `"request_id"`)
}
