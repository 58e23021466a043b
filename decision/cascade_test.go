package decision_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
)

func TestModelIdentityIs(t *testing.T) {
	t.Parallel()
	m := &decision.ModelIdentity{File: "/models/small.gguf", SHA256: "34d5e6c3" + strings.Repeat("0", 56)}
	for name, want := range map[string]bool{
		"34d5e6c3": true, "34D5E6C3": true, m.SHA256: true, "small.gguf": true, "/models/small.gguf": true, "/elsewhere/small.gguf": true,
		"34d5e6c": false, "big.gguf": false, "": false, m.SHA256 + "0": false, "34d5e6c4": false,
	} {
		require.Equal(t, want, m.Is(name), name)
	}
	var none *decision.ModelIdentity
	require.False(t, none.Is("small.gguf"))
}

// ByModel finds what one model of a cascade answered: the final result
// when it is that model's, else the stage it scored, with that stage's
// own scores.
func TestResultByModel(t *testing.T) {
	t.Parallel()
	small := &decision.ModelIdentity{File: "small.gguf", SHA256: strings.Repeat("a", 64)}
	big := &decision.ModelIdentity{File: "big.gguf", SHA256: strings.Repeat("b", 64)}
	first := decision.Result{OptionIDs: []string{"x", "y"}, Probabilities: []float64{0.6, 0.4}, OptionLogits: []float64{0.4, 0}, Temperature: 1,
		PromptVersion: "semif-v1", Model: small, Outcome: &decision.Outcome{Status: decision.StatusEscalate, Reason: "unsure"}}
	final := decision.Result{ID: "d", Kind: "k", OptionIDs: []string{"x", "y"}, Probabilities: []float64{0.1, 0.9}, Model: big, Chosen: "y",
		Outcome: &decision.Outcome{Status: decision.StatusDecided}}
	final.Cascade = []decision.CascadeStage{decision.StageOf(decision.RouteCPU, &first, false), decision.StageOf(decision.RouteGPU, &final, true)}

	got, ok := final.ByModel("big.gguf")
	require.True(t, ok)
	require.Equal(t, final.Probabilities, got.Probabilities)

	got, ok = final.ByModel("aaaaaaaa")
	require.True(t, ok)
	require.Equal(t, "d", got.ID)
	require.Equal(t, "k", got.Kind)
	require.Equal(t, []float64{0.6, 0.4}, got.Probabilities)
	require.Equal(t, []float64{0.4, 0}, got.OptionLogits)
	require.Equal(t, "x", got.Chosen, "the stage's top option")
	require.Equal(t, "semif-v1", got.PromptVersion)
	require.Equal(t, decision.StatusEscalate, got.Outcome.Status)
	require.Empty(t, got.Cascade)

	_, ok = final.ByModel("other.gguf")
	require.False(t, ok)
}
