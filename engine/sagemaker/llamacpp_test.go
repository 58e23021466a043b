//go:build cgo

package sagemaker_test

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/engine/enginetest"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/engine/sagemaker"
	"github.com/verdict-dev/verdict/internal/gguf"
	"github.com/verdict-dev/verdict/internal/server"
)

// TestEndToEndRealEngine: the SageMaker scorer → a local verdict server
// running the real llama.cpp engine on a tiny synthetic model, with the
// first request shed by the server's front (503). Results match what the
// engine answers directly.
func TestEndToEndRealEngine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, gguf.Synth(path, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	e, err := llamacpp.New(llamacpp.Options{ModelPath: path, Threads: 1, ContextSize: 4096})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })

	srv, err := server.New(server.Config{Scorer: e, Model: e.Identity(), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	var requests atomic.Int64
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			answer(w, 503, "ServiceUnavailable", `{"message":"busy"}`, "Retry-After", "1")
			return
		}
		srv.ServeHTTP(w, r)
	}))

	s := newScorer(t, url, nil)
	ds := decisions("The card was charged twice.", "The app crashes on start.", "The card was charged twice.")
	got, err := s.Score(context.Background(), ds)
	require.NoError(t, err)
	requireScored(t, ds, got)
	require.Equal(t, int64(3), requests.Load(), "one shed attempt, then one request per state")

	want, err := e.Score(context.Background(), ds)
	require.NoError(t, err)
	for i := range ds {
		require.Equal(t, want[i].Chosen, got[i].Chosen)
		require.InDeltaSlice(t, want[i].Probabilities, got[i].Probabilities, enginetest.ProbTol(1e-4))
		require.Equal(t, want[i].PromptSHA256, got[i].PromptSHA256)
		require.Equal(t, e.Identity().SHA256, got[i].Model.SHA256)
	}
	_ = sagemaker.ErrEndpoint
}
