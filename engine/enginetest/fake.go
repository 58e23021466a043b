// Package enginetest holds fakes of engine.Scorer for tests of the
// packages above the engine (tune, policy flow, worker, server, commands).
package enginetest

import (
	"context"

	"github.com/verdict-dev/verdict/decision"
)

// FakeRawEngine stands in for llama.cpp behind package tune: it returns
// raw logits at temperature 1 with the first option ahead by Lead (2 when
// zero), or Err for the whole call when set.
type FakeRawEngine struct {
	Lead float64
	Err  error
}

// Score implements engine.Scorer.
func (f FakeRawEngine) Score(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
	if f.Err != nil {
		return nil, f.Err
	}
	lead := f.Lead
	if lead == 0 {
		lead = 2
	}
	rs := make([]decision.Result, len(ds))
	for i, d := range ds {
		lg := make([]float64, len(d.Options))
		lg[0] = lead
		rs[i] = decision.Result{ID: d.ID, OptionIDs: d.OptionIDs(), OptionLogits: lg, Temperature: 1}
	}
	return rs, nil
}
