package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/engine/enginetest"
	"github.com/verdict-dev/verdict/internal/server"
	"github.com/verdict-dev/verdict/internal/tune"
	"github.com/verdict-dev/verdict/policy"
)

// TestServeKeepsTheTemperatureFlagUnderAPolicy: `serve --temperature 4
// --policy` with a policy whose top-level temperature is 1 (as the example
// policy's is) answers at T=4 — [0.62, 0.38] — not at the policy's default
// ([0.88, 0.12]).
func TestServeKeepsTheTemperatureFlagUnderAPolicy(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte("temperature: 1.0\nkinds: {default: {min_probability: 0.5}}\n"))
	require.NoError(t, err)
	b := setup(t, server.Config{Scorer: tune.New(enginetest.FakeRawEngine{}, tune.Config{Temperature: 4}), Policy: policy.HolderOf(p)})
	body := `{"id":"t4","state":"s","question":"q?","options":[{"id":"yes","description":"Yes."},{"id":"no","description":"No."}]}`
	r := do(t, "POST", b.url+"/invocations", []byte(body))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	res := r.json(t)["result"].(map[string]any)
	probs := res["probabilities"].([]any)
	require.InDelta(t, 0.6225, probs[0].(float64), 1e-4, "T=4, not the policy's default of 1")
	require.InDelta(t, 0.3775, probs[1].(float64), 1e-4)
	require.Equal(t, 4.0, res["temperature"])
	require.Equal(t, tune.SourceFlag, res["temperature_source"])
	require.Equal(t, "decided", res["outcome"].(map[string]any)["status"])
}
