package policy

import (
	"context"
	"errors"

	"github.com/verdict-dev/verdict/decision"
)

// ScoreFunc scores decisions: one result per decision, in order, or an
// error for the whole call. engine.Scorer's Score method is one.
type ScoreFunc func(ctx context.Context, ds []decision.Decision) ([]decision.Result, error)

// Apply runs the whole policy around one scoring call: Before for every
// decision, one ScoreFunc call for those the policy did not settle (so the
// engine still batches and shares their state), then After. A whole-call
// scoring error reaches After for each scored decision, which fails closed
// (on_error). It returns one result per decision, in order, and the
// scoring error (nil when scoring succeeded or was not needed), so that a
// queue worker can tell a retryable failure from a decided one.
func (p *Policy) Apply(ctx context.Context, c Caller, ds []decision.Decision, score ScoreFunc) ([]decision.Result, error) {
	plans := make([]Plan, len(ds))
	var toScore []decision.Decision
	var idx []int
	for i, d := range ds {
		plans[i] = p.Before(d, c)
		if plans[i].Outcome == nil {
			toScore = append(toScore, plans[i].Decision)
			idx = append(idx, i)
		}
	}
	var scored []decision.Result
	var err error
	if len(toScore) > 0 {
		scored, err = score(ctx, toScore)
		if err == nil && len(scored) != len(toScore) {
			err = errShortResults
		}
	}
	out := make([]decision.Result, len(ds))
	k := 0
	for i := range ds {
		if plans[i].Outcome != nil {
			out[i] = p.After(plans[i], decision.Result{}, nil)
			continue
		}
		var r decision.Result
		if err == nil {
			r = scored[k]
		}
		out[i] = p.After(plans[i], r, err)
		k++
	}
	return out, err
}

var errShortResults = errors.New("policy: scorer returned a different number of results")
