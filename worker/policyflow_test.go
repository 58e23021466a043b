package worker_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/enginetest"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/internal/tune"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/worker"
)

// TestWorkerKeepsTheTemperatureFlagUnderAPolicy: `worker --temperature 4
// --policy` with a policy whose top-level temperature is 1 (as the example
// policy's is) publishes T=4 results — [0.62, 0.38] — not the policy
// default's [0.88, 0.12]; a decision a rule settles is published with its
// options.
func TestWorkerKeepsTheTemperatureFlagUnderAPolicy(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte(`temperature: 1.0
kinds:
  default:
    min_probability: 0.5
    rules: [{name: canned, when: 'question == "canned?"', option: "no"}]
`))
	require.NoError(t, err)
	b := setup(t, "local", bundleOpts{})
	b.send(t, envelope("r1", mkDecision("a", "some state", "q?"), mkDecision("b", "some state", "canned?")))
	start(t, worker.Config{Queue: b.q, Scorer: tune.New(enginetest.FakeRawEngine{}, tune.Config{Temperature: 4}),
		Sinks: []sink.Sink{b.sink}, Policy: policy.HolderOf(p)})
	got := b.waitResults(t, 2, 30*time.Second)

	rec := decode(t, got["r1/a"][0])
	require.Equal(t, decision.StatusDecided, rec.Status)
	require.InDelta(t, 0.6225, rec.Result.Probabilities[0], 1e-4, "T=4, not the policy's default of 1")
	require.InDelta(t, 0.3775, rec.Result.Probabilities[1], 1e-4)
	require.Equal(t, 4.0, rec.Result.Temperature)
	require.Equal(t, tune.SourceFlag, rec.Result.TemperatureSource)

	rec = decode(t, got["r1/b"][0])
	require.Equal(t, decision.StatusRule, rec.Status)
	require.Equal(t, "no", rec.Result.Chosen)
	require.Equal(t, []string{"yes", "no"}, rec.Result.OptionIDs)
}

// TestReviewOutcomesKeepTheirInputForTheInbox: a decision the policy
// sends to review is published with its input attached for a results
// store (which opens a review with it), and the published bytes carry no
// state.
func TestReviewOutcomesKeepTheirInputForTheInbox(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte("kinds:\n  default:\n    min_probability: 0.99\n    fallback: review\n"))
	require.NoError(t, err)
	store, err := results.OpenFile(filepath.Join(t.TempDir(), "results.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	b := setup(t, "local", bundleOpts{})
	b.send(t, envelope("r1", mkDecision("a", "a private state", "q?")))
	start(t, worker.Config{Queue: b.q, Scorer: enginetest.FakeRawEngine{}, Sinks: []sink.Sink{store, b.sink}, Policy: policy.HolderOf(p)})
	got := b.waitResults(t, 1, 30*time.Second)
	require.NotContains(t, string(got["r1/a"][0]), "a private state", "published bytes carry no state")
	rec := decode(t, got["r1/a"][0])
	require.Equal(t, decision.StatusReview, rec.Status)

	page, _, err := store.Reviews(context.Background(), rec.Tenant, "", 10)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, "a private state", page[0].Input.State.Text)
	require.Equal(t, "q?", page[0].Input.Question)
}
