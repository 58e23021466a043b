package decision_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
)

func validDecision() decision.Decision {
	return decision.Decision{
		ID:       "d1",
		State:    decision.TextState("The state."),
		Question: "Which?",
		Options:  []decision.Option{{ID: "a", Description: "A."}, {ID: "b", Description: "B."}},
	}
}

func TestDecisionValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		mod   func(d *decision.Decision)
		lim   decision.Limits
		paths []string
		class error
	}{
		{name: "valid", mod: func(*decision.Decision) {}},
		{name: "empty id allowed", mod: func(d *decision.Decision) { d.ID = "" }},
		{name: "zero state", mod: func(d *decision.Decision) { d.State = decision.State{} }, paths: []string{"decisions[2].state"}, class: decision.ErrInvalid},
		{name: "whitespace state", mod: func(d *decision.Decision) { d.State = decision.TextState("\n ") }, paths: []string{"decisions[2].state"}, class: decision.ErrInvalid},
		{name: "state over limit", mod: func(d *decision.Decision) { d.State = decision.TextState("12345") }, lim: decision.Limits{MaxStateBytes: 4}, paths: []string{"decisions[2].state"}, class: decision.ErrTooLarge},
		{name: "question empty", mod: func(d *decision.Decision) { d.Question = "" }, paths: []string{"decisions[2].question"}, class: decision.ErrInvalid},
		{name: "question bad utf8", mod: func(d *decision.Decision) { d.Question = "a\xffb" }, paths: []string{"decisions[2].question"}, class: decision.ErrInvalid},
		{name: "question over limit", mod: func(d *decision.Decision) { d.Question = "abcdef" }, lim: decision.Limits{MaxQuestionBytes: 5}, paths: []string{"decisions[2].question"}, class: decision.ErrTooLarge},
		{name: "option id bad utf8", mod: func(d *decision.Decision) { d.Options[1].ID = "\xfe" }, paths: []string{"decisions[2].options[1].id"}, class: decision.ErrInvalid},
		{name: "description bad utf8", mod: func(d *decision.Decision) { d.Options[1].Description = "\xfe" }, paths: []string{"decisions[2].options[1].description"}, class: decision.ErrInvalid},
		{name: "duplicate id", mod: func(d *decision.Decision) { d.Options = append(d.Options, decision.Option{ID: "a"}) }, paths: []string{"decisions[2].options[2].id"}, class: decision.ErrInvalid},
		{name: "min options configurable", mod: func(*decision.Decision) {}, lim: decision.Limits{MinOptions: 3}, paths: []string{"decisions[2].options"}, class: decision.ErrInvalid},
		{name: "metadata empty key", mod: func(d *decision.Decision) { d.Metadata = map[string]string{"": "v"} }, paths: []string{"decisions[2].metadata."}, class: decision.ErrInvalid},
		{name: "metadata over count", mod: func(d *decision.Decision) { d.Metadata = map[string]string{"a": "1", "b": "2"} }, lim: decision.Limits{MaxMetadata: 1}, paths: []string{"decisions[2].metadata"}, class: decision.ErrInvalid},
		{name: "route", mod: func(d *decision.Decision) { d.Route = "fpga" }, paths: []string{"decisions[2].route"}, class: decision.ErrInvalid},
		{name: "priority", mod: func(d *decision.Decision) { d.Priority = "now" }, paths: []string{"decisions[2].priority"}, class: decision.ErrInvalid},
		{name: "id over limit", mod: func(d *decision.Decision) { d.ID = strings.Repeat("i", 257) }, paths: []string{"decisions[2].id"}, class: decision.ErrInvalid},
		{
			name: "everything at once",
			mod: func(d *decision.Decision) {
				d.Question = " "
				d.Options = d.Options[:1]
				d.Route = "x"
				d.Priority = "y"
			},
			paths: []string{"decisions[2].question", "decisions[2].options", "decisions[2].route", "decisions[2].priority"},
			class: decision.ErrInvalid,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := validDecision()
			tc.mod(&d)
			err := d.Validate(tc.lim, "decisions[2]")
			if tc.paths == nil {
				require.NoError(t, err)
				return
			}
			requireClass(t, err, tc.class)
			require.Equal(t, tc.paths, paths(t, err))

			// Without a prefix the paths are bare.
			err = d.Validate(tc.lim, "")
			for i, p := range paths(t, err) {
				require.Equal(t, strings.TrimPrefix(tc.paths[i], "decisions[2]."), p)
			}
		})
	}
}

func TestDecisionOptionIDs(t *testing.T) {
	t.Parallel()
	d := validDecision()
	require.Equal(t, []string{"a", "b"}, d.OptionIDs())
	require.Empty(t, (&decision.Decision{}).OptionIDs())
}

func TestResultJSONRoundTrip(t *testing.T) {
	t.Parallel()
	r := decision.Result{
		ID: "d1", OptionIDs: []string{"a", "b"}, Probabilities: []float64{0.75, 0.25},
		OptionLogits: []float64{1.1, 0}, Chosen: "a", Confidence: 0.5, Margin: 0.5, Temperature: 1,
		PromptVersion: "v1", PromptSHA256: "ab", Readout: "last-position logits", Labels: []string{"A", "B"},
		Tokens: &decision.Tokens{Input: 10, StatePrefix: 4, Evaluated: 6},
		Timing: &decision.Timing{Tokenize: 0.5, Decode: 3, Total: 4},
		Model:  &decision.ModelIdentity{File: "m.gguf", SHA256: "cd"},
		Outcome: &decision.Outcome{Status: decision.StatusFallback, Chosen: "b", Step: "threshold", Reason: "p below 0.8",
			Checks: []decision.Check{{Name: "min_probability", Value: 0.75, Threshold: 0.8}}},
	}
	b := mustJSON(t, r)
	require.Contains(t, string(b), `"timing_ms":`)
	require.Contains(t, string(b), `"calibrated":false`)
	var back decision.Result
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, r, back)

	// An error result keeps confidence and calibrated, drops empty arrays.
	e := decision.Result{ID: "d2", Error: &decision.Error{Code: "busy", Message: "queue full", Retryable: true}}
	require.Equal(t, `{"id":"d2","confidence":0,"margin":0,"calibrated":false,"error":{"code":"busy","message":"queue full","retryable":true}}`, string(mustJSON(t, e)))
	require.Equal(t, "busy: queue full", e.Error.Error())
}
