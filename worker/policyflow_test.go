package worker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/enginetest"
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
