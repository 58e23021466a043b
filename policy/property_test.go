package policy_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

var universe = []string{"o0", "o1", "o2", "o3", "o4", "o5"}

// randomWorld is a random policy and what it allows each tenant, computed
// independently of the policy package.
type randomWorld struct {
	yaml     string
	allowed  map[string][]string // tenant -> allowed options; nil slice: all
	refuse   map[string]bool     // tenant -> mode refuse
	unlisted string              // "allow", "refuse" or "" (no authorization)
}

func pick(r *rand.Rand, n int) []string {
	perm := r.Perm(len(universe))
	out := make([]string, 0, n)
	for _, i := range perm[:n] {
		out = append(out, universe[i])
	}
	return out
}

func randomAction(r *rand.Rand, onError bool) string {
	choices := []string{"abstain", "review", fmt.Sprintf("{option: %s}", universe[r.IntN(len(universe))])}
	if onError {
		choices = append(choices, "error")
	}
	return choices[r.IntN(len(choices))]
}

func newRandomWorld(r *rand.Rand) randomWorld {
	w := randomWorld{allowed: map[string][]string{}, refuse: map[string]bool{}}
	var b strings.Builder
	fmt.Fprintf(&b, "kinds:\n  k:\n    match: [{id: '^k-'}]\n    options: [%s]\n", strings.Join(universe, ", "))
	if r.IntN(2) == 0 {
		fmt.Fprintf(&b, "    min_probability: %.2f\n", r.Float64())
	}
	if r.IntN(2) == 0 {
		fmt.Fprintf(&b, "    min_margin: %.2f\n", r.Float64()/2)
	}
	if r.IntN(2) == 0 {
		fmt.Fprintf(&b, "    option_min: {%s: %.2f}\n", universe[r.IntN(len(universe))], r.Float64())
	}
	if r.IntN(2) == 0 {
		fmt.Fprintf(&b, "    escalate: {below: %.2f, margin_below: %.2f, to: %s}\n", 0.01+0.98*r.Float64(), 0.01+0.49*r.Float64(), []string{"cpu", "gpu"}[r.IntN(2)])
	}
	fmt.Fprintf(&b, "    temperature: %.2f\n", 0.25+3*r.Float64())
	fmt.Fprintf(&b, "    fallback: %s\n    on_error: %s\n", randomAction(r, false), randomAction(r, true))
	b.WriteString("    rules:\n")
	for i := range r.IntN(4) {
		fmt.Fprintf(&b, "      - {name: r%d, when: 'state.contains(\"tok%d\")', option: %s}\n", i, r.IntN(4), universe[r.IntN(len(universe))])
	}
	if r.IntN(5) == 0 { // a rule that fails at run time on text states
		b.WriteString("      - {name: boom, when: 'json.missing == 1', option: o0}\n")
	}
	fmt.Fprintf(&b, "  default:\n    min_probability: %.2f\n    fallback: %s\n", r.Float64(), randomAction(r, false))
	if r.IntN(4) > 0 {
		w.unlisted = []string{"allow", "refuse"}[r.IntN(2)]
		fmt.Fprintf(&b, "authorization:\n  unlisted: %s\n  mode: %s\n  callers:\n", w.unlisted, []string{"filter", "refuse"}[r.IntN(2)])
		for _, tenant := range []string{"t0", "t1", "t2"} {
			fmt.Fprintf(&b, "    - tenant: %s\n", tenant)
			if r.IntN(4) > 0 {
				opts := pick(r, r.IntN(len(universe)+1))
				if len(opts) == 0 {
					opts = pick(r, 1)
				}
				w.allowed[tenant] = opts
				fmt.Fprintf(&b, "      options: [%s]\n", strings.Join(opts, ", "))
			}
			if r.IntN(2) == 0 {
				fmt.Fprintf(&b, "      mode: refuse\n")
			}
		}
	}
	w.yaml = b.String()
	return w
}

// mayReceive reports whether tenant may receive option per the world.
func (w randomWorld) mayReceive(tenant, option string) bool {
	if w.unlisted == "" {
		return true
	}
	opts, listed := w.allowed[tenant]
	if !listed {
		switch tenant {
		case "t0", "t1", "t2":
			return true // listed without an options list
		}
		return w.unlisted == "allow"
	}
	return slices.Contains(opts, option)
}

// TestPropertyOutcomeIsSafe checks, over random policies, decisions, callers
// and engine results, that every outcome is either a non-decision status
// with no option, or names an option the decision declared and the caller
// may receive; and that no failure ever yields decided.
func TestPropertyOutcomeIsSafe(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(4, 2))
	nonDecision := []decision.Status{decision.StatusAbstained, decision.StatusReview, decision.StatusRefused, decision.StatusError, decision.StatusEscalate}
	stages := []policy.Stage{
		{},
		{Pools: bothPools},
		{Pool: decision.RouteCPU, Pools: bothPools},
		{Pool: decision.RouteGPU, Visited: []decision.Route{decision.RouteCPU}, Pools: bothPools},
		{Pool: decision.RouteCPU, Visited: []decision.Route{decision.RouteGPU}, Pools: bothPools},
	}
	withOption := []decision.Status{decision.StatusDecided, decision.StatusRule, decision.StatusFallback}
	counts := map[decision.Status]int{}
	for range 60 {
		w := newRandomWorld(r)
		p, err := policy.Parse([]byte(w.yaml))
		require.NoError(t, err, w.yaml)
		for range 50 {
			n := 2 + r.IntN(len(universe)-1)
			opts := pick(r, n)
			id := "x"
			if r.IntN(3) > 0 {
				id = "k-1"
			}
			d := newDecision(id, fmt.Sprintf("text tok%d tok%d", r.IntN(6), r.IntN(6)), opts...)
			caller := policy.Caller{Tenant: []string{"t0", "t1", "t2", "stranger", ""}[r.IntN(5)], Stage: stages[r.IntN(len(stages))]}

			plan := p.Before(d, caller)
			res := decision.Result{OptionIDs: plan.Decision.OptionIDs()}
			for range plan.Decision.Options {
				res.OptionLogits = append(res.OptionLogits, 6*r.NormFloat64())
			}
			var scoreErr error
			switch r.IntN(12) {
			case 0:
				scoreErr = errors.New("engine: unavailable")
			case 1:
				res.Error = &decision.Error{Code: "busy", Message: "busy", Retryable: true}
			case 2:
				if len(res.OptionLogits) > 0 {
					res.OptionLogits[0] = math.NaN()
				}
			case 3:
				if len(res.OptionLogits) > 0 {
					res.OptionLogits = res.OptionLogits[1:]
				}
			case 4:
				if len(res.OptionIDs) > 0 {
					res.OptionIDs = append([]string{"intruder"}, res.OptionIDs[1:]...)
				}
			case 5:
				res.Chosen = "intruder"
			}
			out := p.After(plan, res, scoreErr)
			o := out.Outcome
			require.NotNil(t, o)
			counts[o.Status]++
			msg := fmt.Sprintf("policy:\n%s\ndecision %v caller %q outcome %+v", w.yaml, opts, caller.Tenant, o)
			require.Equal(t, o.Chosen, out.Chosen, msg)
			require.Equal(t, p.Version(), o.Policy, msg)
			if o.Status == decision.StatusEscalate {
				// Only a scored result escalates, never to a pool the decision was on.
				require.NoError(t, scoreErr, msg)
				require.Nil(t, out.Error, msg)
				require.Equal(t, policy.StepEscalate, o.Step, msg)
				require.NotEqual(t, caller.Stage.Pool, o.Escalate, msg)
				require.NotContains(t, caller.Stage.Visited, o.Escalate, msg)
				require.Contains(t, []decision.Route{decision.RouteCPU, decision.RouteGPU}, o.Escalate, msg)
			} else {
				require.Empty(t, o.Escalate, msg)
			}
			if o.Chosen == "" {
				require.Contains(t, nonDecision, o.Status, msg)
				continue
			}
			require.Contains(t, withOption, o.Status, msg)
			require.Contains(t, opts, o.Chosen, "chosen option was not declared by the decision: "+msg)
			require.Contains(t, plan.Decision.OptionIDs(), o.Chosen, msg)
			require.NotContains(t, plan.Removed, o.Chosen, msg)
			require.True(t, w.mayReceive(caller.Tenant, o.Chosen), "chosen option not allowed: "+msg)
			if o.Status == decision.StatusDecided {
				require.NoError(t, scoreErr, msg)
				require.Nil(t, out.Error, msg)
				require.Equal(t, policy.StepModel, o.Step, msg)
				for _, c := range o.Checks {
					require.True(t, c.Passed, msg)
				}
			}
		}
	}
	// The generator must reach every status, or the property says little.
	for _, s := range append(nonDecision, withOption...) {
		require.Positive(t, counts[s], "status %s never produced: %v", s, counts)
	}
}
