package main

import (
	"context"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

// loadPolicy loads a policy file for offline scoring; "" means none.
func loadPolicy(path string) (*policy.Policy, error) {
	if path == "" {
		return nil, nil
	}
	return policy.Load(path)
}

// scoreFunc is how score, batch and eval score a chunk: through the one
// policy flow (policy.Apply) when a policy is given, else straight through
// the scorer. A failed scoring call is returned, never dropped: an offline
// run has no queue to release work to, so it stops (batch can resume).
func scoreFunc(score policy.ScoreFunc, pol *policy.Policy) func(context.Context, []decision.Decision) ([]decision.Result, error) {
	if pol == nil {
		return score
	}
	return func(ctx context.Context, ds []decision.Decision) ([]decision.Result, error) {
		rs, err := pol.Apply(ctx, policy.Caller{}, ds, score)
		if err != nil {
			return nil, err
		}
		return rs, nil
	}
}
