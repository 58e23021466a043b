package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
)

// scoreChecked scores ds in one call. A decision answered with an error
// fails the measurement: a bench that counted it would time work that was
// not done (and an error result carries no token counts to read).
func scoreChecked(ctx context.Context, sc engine.Scorer, ds []decision.Decision) ([]decision.Result, error) {
	rs, err := sc.Score(ctx, ds)
	if err != nil {
		return nil, err
	}
	for i, r := range rs {
		if r.Error != nil {
			return nil, fmt.Errorf("bench: %s: %s", ds[i].ID, r.Error.Message)
		}
	}
	return rs, nil
}

// scoreOne scores decisions one call each, returning per-call latencies.
func scoreOne(ctx context.Context, sc engine.Scorer, ds []decision.Decision) ([]time.Duration, error) {
	var lat []time.Duration
	for _, d := range ds {
		t := time.Now()
		if _, err := scoreChecked(ctx, sc, []decision.Decision{d}); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	return lat, nil
}

// scoreGroups scores each group in one call (a fan-out over its shared
// state); every decision of a group gets the call's latency.
func scoreGroups(ctx context.Context, sc engine.Scorer, groups [][]decision.Decision) ([]time.Duration, error) {
	var lat []time.Duration
	for _, g := range groups {
		t := time.Now()
		if _, err := scoreChecked(ctx, sc, g); err != nil {
			return nil, err
		}
		d := time.Since(t)
		for range g {
			lat = append(lat, d)
		}
	}
	return lat, nil
}

// prefillReps scores d reps times, one call each, and returns the
// latencies and the prompt's token count.
func prefillReps(ctx context.Context, sc engine.Scorer, d decision.Decision, reps int) (lat []time.Duration, tokens int, err error) {
	for i := 0; i < reps; i++ {
		t := time.Now()
		rs, err := scoreChecked(ctx, sc, []decision.Decision{d})
		if err != nil {
			return nil, 0, err
		}
		lat = append(lat, time.Since(t))
		if rs[0].Tokens != nil {
			tokens = rs[0].Tokens.Input
		}
	}
	return lat, tokens, nil
}
