//go:build cgo

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/gguf"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

// upCascadePolicy: with two options a softmax never reaches 1, nor a
// margin, so every "by-prob" and "by-margin" decision escalates from the
// small model on the cpu pool to the big one on the gpu pool, whose
// answer stands there; "direct" ones never escalate, and a rule settles
// "canned" before any model.
const upCascadePolicy = `
kinds:
  by-prob:
    match: [{id: '^prob-'}]
    escalate: {below: 1, to: gpu}
    fallback: review
  by-margin:
    match: [{id: '^margin-'}]
    escalate: {margin_below: 1, to: gpu}
    fallback: abstain
    rules: [{name: canned, when: 'state.contains("canned")', option: it}]
  direct:
    match: [{id: '^direct-'}]
`

// cascadeFiles writes a cascade's files in a new directory: the small
// model (synthetic tiny, seed 1), the big one (bigShape) and
// upCascadePolicy.
func cascadeFiles(t *testing.T, bigShape gguf.SynthOptions) (dir, small, big, pol string) {
	t.Helper()
	dir = t.TempDir()
	small, big, pol = filepath.Join(dir, "small.gguf"), filepath.Join(dir, "big.gguf"), filepath.Join(dir, "policy.yaml")
	require.NoError(t, gguf.Synth(small, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	require.NoError(t, gguf.Synth(big, bigShape))
	require.NoError(t, os.WriteFile(pol, []byte(upCascadePolicy), 0o644))
	return dir, small, big, pol
}

// TestUpCascade runs `verdict up` with two pools and two synthetic models
// of different sizes: decisions escalated by probability and by margin
// are published once, by the gpu pool, with both stages in their cascade;
// the others are published by the pool that scored them.
func TestUpCascade(t *testing.T) {
	t.Parallel()
	bin := buildVerdict(t)
	dir, small, big, pol := cascadeFiles(t, gguf.SynthOptions{Shape: "medium", Seed: 2})
	p := startUp(t, bin, "--data", filepath.Join(dir, "data"), "--pools", "cpu,gpu", "--model", small, "--gpu-model", big, "--policy", pol)

	opts := `"options": [{"id": "it", "description": "IT."}, {"id": "facilities", "description": "Facilities."}]`
	recs := submitAndWait(t, p.url, `{"decisions": [
		{"id": "prob-1", "state": "The VPN drops every hour.", "question": "Which team?", `+opts+`},
		{"id": "margin-1", "state": "The VPN drops every hour.", "question": "Which team handles it?", `+opts+`},
		{"id": "margin-canned", "state": "canned answer", "question": "Which team?", `+opts+`},
		{"id": "direct-1", "state": "The VPN drops every hour.", "question": "Who?", `+opts+`},
		{"id": "prob-on-gpu", "state": "Toner is out.", "question": "Which team?", "route": "gpu", `+opts+`}]}`)
	require.Len(t, recs, 5)

	for _, id := range []string{"prob-1", "margin-1"} {
		r := recs[id].Result
		require.Equal(t, decision.StatusDecided, recs[id].Status, id)
		require.Equal(t, "big.gguf", r.Model.File, id)
		require.Len(t, r.Cascade, 2, id)
		first, last := r.Cascade[0], r.Cascade[1]
		require.Equal(t, decision.RouteCPU, first.Pool)
		require.Equal(t, "small.gguf", first.Model.File)
		require.NotEmpty(t, first.Model.SHA256)
		require.Equal(t, decision.StatusEscalate, first.Status)
		require.Len(t, first.Probabilities, 2)
		require.Contains(t, []string{"it", "facilities"}, first.Chosen)
		require.Equal(t, decision.RouteGPU, last.Pool)
		require.Equal(t, "big.gguf", last.Model.File)
		require.NotEqual(t, first.Model.SHA256, last.Model.SHA256)
		require.Equal(t, r.Probabilities, last.Probabilities, "the result is the last stage's")
		require.True(t, last.Decided)
	}
	require.Contains(t, recs["prob-1"].Result.Cascade[0].Reason, "p_max")
	require.Contains(t, recs["margin-1"].Result.Cascade[0].Reason, "margin")

	require.Equal(t, decision.StatusRule, recs["margin-canned"].Status)
	require.Empty(t, recs["margin-canned"].Result.Cascade)
	require.Equal(t, "small.gguf", recs["direct-1"].Result.Model.File)
	require.Empty(t, recs["direct-1"].Result.Cascade)
	// Routed to the gpu pool first: the big model answers at once.
	require.Equal(t, decision.StatusDecided, recs["prob-on-gpu"].Status)
	require.Equal(t, "big.gguf", recs["prob-on-gpu"].Result.Model.File)
	require.Empty(t, recs["prob-on-gpu"].Result.Cascade)

	_, _, metrics := httpDo(t, "GET", p.url+"/metrics", "", nil)
	require.Contains(t, string(metrics), `verdict_worker_decisions_escalated_total{from="cpu",queue="cpu",to="gpu"} 2`)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t))
}

// TestUpRefusesAnEscalationItCannotRun: a policy escalating to a pool
// `up` does not run, or from its only pool, is refused before any model
// is loaded, with the clause's path.
func TestUpRefusesAnEscalationItCannotRun(t *testing.T) {
	t.Parallel()
	bin := buildVerdict(t)
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(pol, []byte(upCascadePolicy), 0o644))
	for pools, want := range map[string]string{
		"cpu": "kinds.by-prob.escalate.to: pool gpu is not run here (pools: cpu) (line 5)",
		"gpu": "kinds.by-prob.escalate.to: gpu is the only pool: a pool cannot escalate to itself (line 5)",
	} {
		out, err := exec.Command(bin, "up", "--data", filepath.Join(dir, "data-"+pools), "--pools", pools, "--policy", pol, "--model", filepath.Join(dir, "missing.gguf")).CombinedOutput()
		require.Error(t, err, pools)
		require.Contains(t, string(out), "flag --policy: policy: "+pol+": "+want, pools)
		require.Contains(t, string(out), "kinds.by-margin.escalate.to", pools)
	}
}

// TestUpCascadeToASageMakerPool: `verdict up` whose gpu pool is a
// SageMaker endpoint (here a `verdict serve` of the big model): escalated
// decisions are answered by the endpoint's model with the small model's
// stage kept, and /v1/status names the endpoint.
func TestUpCascadeToASageMakerPool(t *testing.T) {
	t.Parallel()
	bin := buildVerdict(t)
	dir, small, big, pol := cascadeFiles(t, gguf.SynthOptions{Shape: "tiny", Seed: 5})

	serve := startVerdict(t, bin, nil, "serve", "--addr", "127.0.0.1:0", "--model", big, "--threads", "1", "--ctx", "4096", "--log-format", "json")
	url := "http://" + serve.waitMsg(t, "listening").Addr
	serve.waitMsg(t, "model loaded")
	p := startUpEnv(t, bin, []string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"},
		"--data", filepath.Join(dir, "data"), "--pools", "cpu,gpu", "--model", small, "--policy", pol,
		"--gpu-sagemaker-endpoint", "local", "--gpu-sagemaker-url", url)

	opts := `"options": [{"id": "it", "description": "IT."}, {"id": "facilities", "description": "Facilities."}]`
	recs := submitAndWait(t, p.url, `{"decisions": [
		{"id": "prob-1", "state": "The VPN drops every hour.", "question": "Which team?", `+opts+`},
		{"id": "direct-1", "state": "The VPN drops every hour.", "question": "Who?", `+opts+`}]}`)
	r := recs["prob-1"].Result
	require.Equal(t, decision.StatusDecided, recs["prob-1"].Status)
	require.Equal(t, "big.gguf", r.Model.File, "answered by the endpoint's model")
	require.Len(t, r.Cascade, 2)
	require.Equal(t, "small.gguf", r.Cascade[0].Model.File)
	require.Equal(t, "big.gguf", r.Cascade[1].Model.File)
	require.Equal(t, "small.gguf", recs["direct-1"].Result.Model.File)
	require.Empty(t, recs["direct-1"].Result.Cascade)

	_, _, body := httpDo(t, "GET", p.url+"/v1/status", "", nil)
	require.Contains(t, string(body), `"model":"sagemaker:local"`)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t))
}

// submitAndWait posts a request to `verdict up` at url, waits until every
// decision of it has its final result, and returns the records by
// decision id.
func submitAndWait(t *testing.T, url, body string) map[string]sink.Record {
	t.Helper()
	status, _, out := httpDo(t, "POST", url+"/v1/decisions", body, jsonCT)
	require.Equal(t, http.StatusAccepted, status, string(out))
	var acc struct {
		RequestID string `json:"request_id"`
	}
	require.NoError(t, json.Unmarshal(out, &acc))
	var st results.Request
	require.Eventually(t, func() bool {
		_, _, body := httpDo(t, "GET", url+"/v1/requests/"+acc.RequestID, "", nil)
		return json.Unmarshal(body, &st) == nil && st.Status == results.StatusDone
	}, 120*time.Second, 100*time.Millisecond)
	recs := map[string]sink.Record{}
	for _, d := range st.Decisions {
		var rec sink.Record
		require.NoError(t, json.Unmarshal(d.Record, &rec))
		recs[d.ID] = rec
	}
	return recs
}
