package policy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

// fakeFlowScorer stands in for the engine: it records what it was asked to
// score and answers with fixed logits (the first option ahead by 2), or
// with err, or with one result too few.
type fakeFlowScorer struct {
	err      error
	short    bool
	resultFn func(d decision.Decision) decision.Result
	calls    [][]string // decision ids of each call
}

func (f *fakeFlowScorer) Score(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.ID)
	}
	f.calls = append(f.calls, ids)
	if f.err != nil {
		return nil, f.err
	}
	rs := make([]decision.Result, len(ds))
	for i, d := range ds {
		if f.resultFn != nil {
			rs[i] = f.resultFn(d)
			continue
		}
		lg := make([]float64, len(d.Options))
		lg[0] = 2
		rs[i] = decision.Result{ID: d.ID, Kind: d.Kind, OptionIDs: d.OptionIDs(), OptionLogits: lg, Temperature: 1}
	}
	if f.short {
		rs = rs[:len(rs)-1]
	}
	return rs, nil
}

const flowPolicy = `
kinds:
  route:
    options: [billing, other]
    rules:
      - {name: chargeback, when: 'state.contains("chargeback")', option: billing}
    on_error: review
`

func flowDecision(id, state string) decision.Decision {
	d := newDecision(id, state, "billing", "other")
	d.Kind = "route"
	return d
}

// TestFlow: the one check → score what is unsettled → finish flow that
// every entry point runs, with each way a scoring call can end.
func TestFlow(t *testing.T) {
	t.Parallel()
	p := mustParse(t, flowPolicy)
	boom := errors.New("engine closed")
	ds := []decision.Decision{flowDecision("a", "a chargeback"), flowDecision("b", "plain"), flowDecision("c", "plain too")}
	for _, c := range []struct {
		name      string
		scorer    *fakeFlowScorer
		ds        []decision.Decision
		wantCalls [][]string
		wantErr   error
		want      []decision.Status
	}{
		{"settled and scored", &fakeFlowScorer{}, ds, [][]string{{"b", "c"}}, nil,
			[]decision.Status{decision.StatusRule, decision.StatusDecided, decision.StatusDecided}},
		{"all settled: no scoring call", &fakeFlowScorer{}, ds[:1], nil, nil,
			[]decision.Status{decision.StatusRule}},
		{"whole-call error: on_error and the error", &fakeFlowScorer{err: boom}, ds, [][]string{{"b", "c"}}, boom,
			[]decision.Status{decision.StatusRule, decision.StatusReview, decision.StatusReview}},
		{"too few results: on_error and ErrResultCount", &fakeFlowScorer{short: true}, ds, [][]string{{"b", "c"}}, policy.ErrResultCount,
			[]decision.Status{decision.StatusRule, decision.StatusReview, decision.StatusReview}},
		{"per-decision error: on_error, no flow error", &fakeFlowScorer{resultFn: func(d decision.Decision) decision.Result {
			return decision.Result{ID: d.ID, OptionIDs: d.OptionIDs(), Error: &decision.Error{Code: "too_large", Message: "too long"}}
		}}, ds[1:2], [][]string{{"b"}}, nil, []decision.Status{decision.StatusReview}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs, err := p.Apply(context.Background(), policy.Caller{}, c.ds, c.scorer.Score)
			if c.wantErr != nil {
				require.ErrorIs(t, err, c.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, c.wantCalls, c.scorer.calls)
			require.Len(t, rs, len(c.ds))
			for i, r := range rs {
				require.Equal(t, c.ds[i].ID, r.ID, "results in input order")
				require.Equal(t, c.want[i], r.Outcome.Status, r.ID)
				require.Equal(t, []string{"billing", "other"}, r.OptionIDs, "%s: every result, settled or not, names its options", r.ID)
				if c.want[i] == decision.StatusReview {
					require.NotNil(t, r.Error, "a failed decision carries its error")
				}
			}
		})
	}
}

// TestFlowStartFinish: the worker scores Pending itself (merged with other
// messages' decisions) and hands the results back to Finish.
func TestFlowStartFinish(t *testing.T) {
	t.Parallel()
	p := mustParse(t, flowPolicy)
	f := p.Start([]decision.Decision{flowDecision("a", "plain"), flowDecision("b", "chargeback")}, policy.Caller{})
	pending := f.Pending()
	require.Len(t, pending, 1)
	require.Equal(t, "a", pending[0].ID)
	rs, err := (&fakeFlowScorer{}).Score(context.Background(), pending)
	require.NoError(t, err)
	out, err := f.Finish(rs, nil)
	require.NoError(t, err)
	require.Equal(t, decision.StatusDecided, out[0].Outcome.Status)
	require.Equal(t, decision.StatusRule, out[1].Outcome.Status)
}

// TestBeforeSeparatesKindAndFileTemperature: the kind's own temperature
// and the file's top-level one reach the scorer apart, because they rank
// on either side of --temperature.
func TestBeforeSeparatesKindAndFileTemperature(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		yaml             string
		kind, file, plan float64
	}{
		{"kinds: {default: {}}\n", 0, 0, 0},
		{"temperature: 1\nkinds: {default: {}}\n", 0, 1, 1},
		{"temperature: 1\nkinds: {default: {temperature: 2}}\n", 2, 1, 2},
		{"kinds: {default: {temperature: 2}}\n", 2, 0, 2},
		{"temperature: 3\n", 0, 3, 3}, // the implicit default kind
	} {
		plan := mustParse(t, c.yaml).Before(newDecision("q", "x", "a", "b"), policy.Caller{})
		require.Equal(t, c.kind, plan.Decision.KindTemperature, c.yaml)
		require.Equal(t, c.file, plan.Decision.PolicyTemperature, c.yaml)
		require.Equal(t, c.plan, plan.Temperature, c.yaml)
	}
}
