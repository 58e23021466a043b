//go:build cgo

package worker_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/enginetest"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/engine/sagemaker"
	"github.com/verdict-dev/verdict/internal/gguf"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/server"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/worker"
)

// TestCascadeSageMakerSecondStage: the cpu pool scores with the small
// model in-process (llama.cpp); the gpu pool is a SageMaker endpoint, here
// a `verdict serve` handler on the big model. Escalated decisions are
// answered by the endpoint's model, with the small model's stage kept in
// the cascade; the others never reach the endpoint.
func TestCascadeSageMakerSecondStage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	smallPath, bigPath := filepath.Join(dir, "small.gguf"), filepath.Join(dir, "big.gguf")
	require.NoError(t, gguf.Synth(smallPath, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	require.NoError(t, gguf.Synth(bigPath, gguf.SynthOptions{Shape: "tiny", Seed: 7}))
	small, err := llamacpp.New(llamacpp.Options{ModelPath: smallPath, ContextSize: 4096})
	require.NoError(t, err)
	defer small.Close()
	big, err := llamacpp.New(llamacpp.Options{ModelPath: bigPath, ContextSize: 4096})
	require.NoError(t, err)
	defer big.Close()

	const state = "The customer cannot log in after the password reset and is locked out."
	ds := []decision.Decision{
		mkDecision("esc-access", state, "Is this about account access?"),
		mkDecision("esc-urgent", state, "Is this urgent?"),
		mkDecision("keep", state, "Is this billing?"),
	}
	want, err := big.Score(context.Background(), ds[:2])
	require.NoError(t, err)

	ep, url := startEndpoint(t, server.Config{Scorer: big, Model: big.Identity()})
	p, err := policy.Parse([]byte(killPolicy))
	require.NoError(t, err)
	h := policy.HolderOf(p)
	c := newCascade(t)
	c.b.send(t, envelope("sm-1", ds...))
	start(t, worker.Config{Queue: c.cpu, Scorer: small, Sinks: []sink.Sink{c.b.sink}, Policy: h,
		Pool: decision.RouteCPU, Escalate: map[decision.Route]queue.Sender{decision.RouteGPU: c.gpu}})
	start(t, worker.Config{Queue: c.gpu, Scorer: sageMakerScorer(t, url, sagemaker.Config{Concurrency: 1}), Sinks: []sink.Sink{c.b.sink}, Policy: h,
		Pool: decision.RouteGPU})
	got := c.b.waitResults(t, 3, 60*time.Second)
	require.Len(t, got, 3)

	for i, id := range []string{"esc-access", "esc-urgent"} {
		rec := decode(t, got["sm-1/"+id][0])
		require.Equal(t, decision.StatusDecided, rec.Status, id)
		require.Equal(t, big.Identity().SHA256, rec.Result.Model.SHA256, id)
		for j := range want[i].Probabilities {
			require.InDelta(t, want[i].Probabilities[j], rec.Result.Probabilities[j], enginetest.ProbTol(1e-5), id)
		}
		require.Len(t, rec.Result.Cascade, 2, id)
		require.Equal(t, small.Identity().SHA256, rec.Result.Cascade[0].Model.SHA256, id)
		require.Equal(t, decision.StatusEscalate, rec.Result.Cascade[0].Status, id)
		require.Equal(t, big.Identity().SHA256, rec.Result.Cascade[1].Model.SHA256, id)
		require.True(t, rec.Result.Cascade[1].Decided, id)
	}
	keep := decode(t, got["sm-1/keep"][0])
	require.Equal(t, small.Identity().SHA256, keep.Result.Model.SHA256)
	require.Empty(t, keep.Result.Cascade)

	var asked []string
	for _, inv := range ep.invocations() {
		asked = append(asked, inv.questions...)
	}
	require.ElementsMatch(t, []string{"Is this about account access?", "Is this urgent?"}, asked, "only the escalated decisions reach the endpoint")
}
