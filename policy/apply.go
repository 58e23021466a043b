package policy

import (
	"context"
	"errors"
	"fmt"

	"github.com/verdict-dev/verdict/decision"
)

// ScoreFunc scores decisions: one result per decision, in order, or an
// error for the whole call. engine.Scorer's Score method is one.
type ScoreFunc func(ctx context.Context, ds []decision.Decision) ([]decision.Result, error)

// ErrResultCount is the flow's error when a scorer answers with a different
// number of results than it was given decisions.
var ErrResultCount = errors.New("policy: the scorer returned a different number of results than decisions")

// Flow is one caller's decisions on their way through one policy: the
// check → score what is unsettled → finish sequence that every entry point
// (serve, the queue worker, score, batch, eval) runs. Start plans every
// decision with Before; the caller scores Pending (in as many engine calls
// as it likes, in order); Finish applies After to every decision. Apply is
// the three in one call.
//
// A Flow holds its *Policy, so Before and After of a decision use the same
// policy even when a Holder reloads in between. It is not safe for
// concurrent use.
type Flow struct {
	p       *Policy
	plans   []Plan
	pending []int // index in plans of each decision to score, in order
}

// Start plans ds for caller c: Before on each decision. The decisions the
// policy did not settle are in Pending.
func (p *Policy) Start(ds []decision.Decision, c Caller) *Flow {
	f := &Flow{p: p, plans: make([]Plan, len(ds))}
	for i, d := range ds {
		f.plans[i] = p.Before(d, c)
		if f.plans[i].Outcome == nil {
			f.pending = append(f.pending, i)
		}
	}
	return f
}

// Pending returns what to score, in order: the planned decision (options
// the caller may not receive removed, the kind's temperature and debias
// set) of each decision the policy did not settle. It is empty when every
// decision was settled.
func (f *Flow) Pending() []decision.Decision {
	ds := make([]decision.Decision, len(f.pending))
	for k, i := range f.pending {
		ds[k] = f.plans[i].Decision
	}
	return ds
}

// Finish settles every decision: scored holds one result per Pending
// decision, in order, or err is the scoring call's failure. It returns one
// result per decision given to Start, in order, each with its Outcome, and
// the scoring error (or ErrResultCount when scored has the wrong length).
//
// With an error every scored decision gets the kind's on_error outcome and
// the error in its result; the caller decides whether those results are
// the answer (an offline run that wants them) or the error is (a server
// answers 503, a queue worker releases the message).
func (f *Flow) Finish(scored []decision.Result, err error) ([]decision.Result, error) {
	if err == nil && len(scored) != len(f.pending) {
		err = fmt.Errorf("%w: %d results for %d decisions", ErrResultCount, len(scored), len(f.pending))
	}
	out := make([]decision.Result, len(f.plans))
	k := 0
	for i, plan := range f.plans {
		if plan.Outcome != nil {
			out[i] = f.p.After(plan, decision.Result{}, nil)
			continue
		}
		var r decision.Result
		if err == nil {
			r = scored[k]
		}
		out[i] = f.p.After(plan, r, err)
		k++
	}
	return out, err
}

// Apply runs the whole flow around one scoring call: Start, one score call
// for the decisions the policy did not settle (none when it settled all),
// so the engine still batches them and shares their state, then Finish.
func (p *Policy) Apply(ctx context.Context, c Caller, ds []decision.Decision, score ScoreFunc) ([]decision.Result, error) {
	f := p.Start(ds, c)
	var scored []decision.Result
	var err error
	if pending := f.Pending(); len(pending) > 0 {
		scored, err = score(ctx, pending)
	}
	return f.Finish(scored, err)
}
