package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
)

// fakeScorer stands in for the engine (these tests need no llama.cpp): it
// answers every decision with fail's error result, or else a scored
// result with token counts.
type fakeScorer struct {
	fail  string // decision ID to answer with an error result
	calls int
}

func (f *fakeScorer) Score(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
	f.calls++
	out := make([]decision.Result, len(ds))
	for i := range ds {
		if ds[i].ID == f.fail {
			out[i] = engine.ErrorResult(&ds[i], engine.ErrContextFull)
			continue
		}
		out[i] = decision.Result{ID: ds[i].ID, Tokens: &decision.Tokens{Input: 7}}
	}
	return out, nil
}

// A decision answered with an error fails the measurement with its ID and
// message; it is never read as scored (an error result has no token
// counts: the prefill table used to dereference them and crash).
func TestErrorResultsFailTheMeasurement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := decision.Decision{ID: "prefill"}
	_, _, err := prefillReps(ctx, &fakeScorer{fail: "prefill"}, d, 3)
	require.ErrorContains(t, err, "bench: prefill: ")
	require.ErrorContains(t, err, "does not fit")

	_, err = scoreOne(ctx, &fakeScorer{fail: "b"}, []decision.Decision{{ID: "a"}, {ID: "b"}})
	require.ErrorContains(t, err, "bench: b: ")
	_, err = scoreGroups(ctx, &fakeScorer{fail: "g2"}, [][]decision.Decision{{{ID: "g1"}}, {{ID: "x"}, {ID: "g2"}}})
	require.ErrorContains(t, err, "bench: g2: ")
}

func TestMeasurementsTimeEveryDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeScorer{}
	lat, tokens, err := prefillReps(ctx, f, decision.Decision{ID: "p"}, 3)
	require.NoError(t, err)
	require.Len(t, lat, 3)
	require.Equal(t, 7, tokens)
	lat, err = scoreGroups(ctx, f, [][]decision.Decision{{{ID: "a"}, {ID: "b"}}, {{ID: "c"}}})
	require.NoError(t, err)
	require.Len(t, lat, 3, "one latency per decision")
	require.Equal(t, lat[0], lat[1], "a group's decisions share its call's latency")
	require.Equal(t, 3+2, f.calls)
}
