package decision_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
)

func TestOutcomeEscalateJSON(t *testing.T) {
	t.Parallel()
	o := decision.Outcome{Status: decision.StatusEscalate, Step: "escalate", Reason: "model chose billing; p_max 0.61 below 0.8; escalating to gpu", Escalate: decision.RouteGPU}
	b, err := json.Marshal(o)
	require.NoError(t, err)
	require.JSONEq(t, `{"status":"escalate","step":"escalate","reason":"model chose billing; p_max 0.61 below 0.8; escalating to gpu","escalate":"gpu"}`, string(b))
	var back decision.Outcome
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, o, back)

	// Every other outcome leaves the field out.
	b, err = json.Marshal(decision.Outcome{Status: decision.StatusDecided, Chosen: "a", Step: "model"})
	require.NoError(t, err)
	require.NotContains(t, string(b), "escalate")
}
