package policy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

// cascadePolicy escalates uncertain support decisions from the small model
// to the gpu pool.
const cascadePolicy = `
kinds:
  support:
    match: [{id: '^t-'}]
    options: [billing, technical, other]
    min_probability: 0.5
    rules:
      - {name: chargeback, when: 'state.contains("chargeback")', option: billing}
    escalate: {below: 0.80, margin_below: 0.20, to: gpu}
    fallback: review
    on_error: abstain
  margin-only:
    match: [{id: '^m-'}]
    escalate: {margin_below: 0.2, to: cpu}
    fallback: {option: other}
`

func TestParseEscalate(t *testing.T) {
	t.Parallel()
	p := mustParse(t, cascadePolicy)
	require.Equal(t, []decision.Route{decision.RouteCPU, decision.RouteGPU}, p.EscalationPools())
	require.Empty(t, mustParse(t, ticketPolicy).EscalationPools())
	require.Empty(t, policy.Default().EscalationPools())
	var nilPolicy *policy.Policy
	require.Empty(t, nilPolicy.EscalationPools())
	// The default kind may escalate too.
	require.Equal(t, []decision.Route{decision.RouteGPU}, mustParse(t, "kinds: {default: {escalate: {below: 1, to: gpu}}}\n").EscalationPools())

	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{name: "below too high", yaml: "kinds: {support: {escalate: {below: 1.5, to: gpu}}}\n", want: []string{"kinds.support.escalate.below: must be in (0, 1], got 1.5 (line 1)"}},
		{name: "below zero", yaml: "kinds: {support: {escalate: {below: 0, to: gpu}}}\n", want: []string{"kinds.support.escalate.below: must be in (0, 1], got 0"}},
		{name: "margin negative", yaml: "kinds: {support: {escalate: {margin_below: -0.1, to: gpu}}}\n", want: []string{"kinds.support.escalate.margin_below: must be in (0, 1], got -0.1"}},
		{name: "margin not a number", yaml: "kinds: {support: {escalate: {margin_below: low, to: gpu}}}\n", want: []string{"kinds.support.escalate.margin_below: must be a number, got a string"}},
		{name: "unknown pool", yaml: "kinds: {support: {escalate: {below: 0.8, to: tpu}}}\n", want: []string{`kinds.support.escalate.to: unknown pool "tpu" (want cpu or gpu)`}},
		{name: "empty pool", yaml: "kinds: {support: {escalate: {below: 0.8, to: ''}}}\n", want: []string{`kinds.support.escalate.to: unknown pool "" (want cpu or gpu)`}},
		{name: "pool not a string", yaml: "kinds: {support: {escalate: {below: 0.8, to: [gpu]}}}\n", want: []string{"kinds.support.escalate.to: must be a string, got a list"}},
		{name: "no pool", yaml: "kinds: {support: {escalate: {below: 0.8}}}\n", want: []string{"kinds.support.escalate.to: is required"}},
		{name: "no bound", yaml: "kinds: {support: {escalate: {to: gpu}}}\n", want: []string{`kinds.support.escalate: must set "below" or "margin_below"`}},
		{name: "empty", yaml: "kinds: {support: {escalate: {}}}\n", want: []string{`kinds.support.escalate: must set "below" or "margin_below"`, "kinds.support.escalate.to: is required"}},
		{name: "unknown field", yaml: "kinds: {support: {escalate: {below: 0.8, above: 0.9, to: gpu}}}\n", want: []string{`kinds.support.escalate.above: unknown field "above" (known: below, margin_below, to)`}},
		{name: "not a mapping", yaml: "kinds: {support: {escalate: gpu}}\n", want: []string{"kinds.support.escalate: must be a mapping, got a string"}},
		{name: "null", yaml: "kinds: {support: {escalate: }}\n", want: []string{"kinds.support.escalate: must be a mapping, got null"}},
		{name: "every problem", yaml: "kinds:\n  support:\n    escalate:\n      below: 2\n      margin_below: 2\n      to: fpga\n", want: []string{
			"kinds.support.escalate.below: must be in (0, 1], got 2 (line 4)",
			"kinds.support.escalate.margin_below: must be in (0, 1], got 2 (line 5)",
			`kinds.support.escalate.to: unknown pool "fpga" (want cpu or gpu) (line 6)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := policy.Parse([]byte(tt.yaml))
			require.ErrorIs(t, err, policy.ErrInvalid)
			require.Nil(t, p)
			var le *policy.LoadError
			require.ErrorAs(t, err, &le)
			require.Len(t, le.Errors, len(tt.want), err.Error())
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestAfterEscalate(t *testing.T) {
	t.Parallel()
	p := mustParse(t, cascadePolicy)
	first := policy.Stage{Pools: bothPools}
	onCPU := policy.Stage{Pool: decision.RouteCPU, Pools: bothPools}
	onGPU := policy.Stage{Pool: decision.RouteGPU, Visited: []decision.Route{decision.RouteCPU}, Pools: bothPools}
	backOnCPU := policy.Stage{Pool: decision.RouteCPU, Visited: []decision.Route{decision.RouteGPU}, Pools: bothPools}
	support := func(state string) decision.Decision {
		return newDecision("t-1", state, "billing", "technical", "other")
	}
	margins := newDecision("m-1", "x", "billing", "technical", "other")
	engineErr := errors.New("engine: unavailable")

	tests := []struct {
		name     string
		stage    policy.Stage
		d        decision.Decision
		probs    []float64 // as logits, log(p)
		raw      []float64 // as probabilities, kept exactly
		scoreErr error
		status   decision.Status
		chosen   string
		escalate decision.Route
		step     string
		failed   []string // names of failed checks
		reason   string   // the whole reason
	}{
		{name: "below the probability bound", stage: first, d: support("x"), probs: []float64{0.61, 0.3, 0.09},
			status: decision.StatusEscalate, escalate: decision.RouteGPU, step: "escalate", failed: []string{"escalate.below"},
			reason: "model chose billing; p_max 0.61 below 0.8; escalating to gpu"},
		{name: "below the margin bound", stage: first, d: margins, probs: []float64{0.55, 0.4, 0.05},
			status: decision.StatusEscalate, escalate: decision.RouteCPU, step: "escalate", failed: []string{"escalate.margin_below"},
			reason: "model chose billing; margin 0.15 below 0.2; escalating to cpu"},
		{name: "below both, and a failed threshold", stage: onCPU, d: support("x"), probs: []float64{0.1, 0.45, 0.45 - 0.0001},
			status: decision.StatusEscalate, escalate: decision.RouteGPU, step: "escalate", failed: []string{"min_probability", "escalate.below", "escalate.margin_below"},
			reason: "model chose technical; p_max 0.45 below 0.8, margin 0.0001 below 0.2; escalating to gpu"},
		{name: "both bounds met", stage: first, d: support("x"), probs: []float64{0.9, 0.06, 0.04},
			status: decision.StatusDecided, chosen: "billing", step: "model",
			reason: "model chose billing with p=0.9, margin 0.84; thresholds passed"},
		{name: "bound met exactly", stage: first, d: support("x"), raw: []float64{0.8, 0.15, 0.05},
			status: decision.StatusDecided, chosen: "billing", step: "model"},
		{name: "on the pool it names, the thresholds decide", stage: onGPU, d: support("x"), probs: []float64{0.61, 0.3, 0.09},
			status: decision.StatusDecided, chosen: "billing", step: "model",
			reason: "model chose billing with p=0.61, margin 0.31; thresholds passed"},
		{name: "on the pool it names, a threshold fails", stage: onGPU, d: support("x"), probs: []float64{0.45, 0.3, 0.25},
			status: decision.StatusReview, step: "threshold", failed: []string{"min_probability"}},
		{name: "a visited pool", stage: backOnCPU, d: support("x"), probs: []float64{0.61, 0.3, 0.09},
			status: decision.StatusReview, step: "escalate", failed: []string{"escalate.below"},
			reason: "model chose billing; p_max 0.61 below 0.8; cannot escalate to gpu, already visited; routed to review"},
		{name: "a visited pool, fallback option", stage: policy.Stage{Visited: []decision.Route{decision.RouteCPU}, Pools: bothPools}, d: margins, probs: []float64{0.55, 0.4, 0.05},
			status: decision.StatusFallback, chosen: "other", step: "escalate", failed: []string{"escalate.margin_below"},
			reason: "model chose billing; margin 0.15 below 0.2; cannot escalate to cpu, already visited; fallback other"},
		{name: "certain on the last pool", stage: onGPU, d: support("x"), probs: []float64{0.05, 0.9, 0.05},
			status: decision.StatusDecided, chosen: "technical", step: "model"},
		{name: "a rule decides first", stage: first, d: support("a chargeback"), probs: []float64{0.34, 0.33, 0.33},
			status: decision.StatusRule, chosen: "billing", step: "rule", reason: `rule "chargeback" matched: billing`},
		{name: "a scoring error", stage: first, d: support("x"), scoreErr: engineErr,
			status: decision.StatusAbstained, step: "on_error", reason: "scoring failed: engine: engine: unavailable; abstained"},
		{name: "a result that does not fit", stage: first, d: support("x"), probs: []float64{0.5, 0.5},
			status: decision.StatusAbstained, step: "on_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan := p.Before(tt.d, policy.Caller{Tenant: "acme", Stage: tt.stage})
			require.Equal(t, tt.stage, plan.Stage)
			var r decision.Result
			switch {
			case tt.probs != nil:
				r = scored(plan, tt.probs...)
				r.OptionIDs = r.OptionIDs[:min(len(r.OptionIDs), len(tt.probs))]
			case tt.raw != nil:
				r = decision.Result{OptionIDs: plan.Decision.OptionIDs(), Probabilities: tt.raw}
			}
			out := p.After(plan, r, tt.scoreErr)
			o := out.Outcome
			require.NotNil(t, o)
			require.Equal(t, tt.status, o.Status, o.Reason)
			require.Equal(t, tt.chosen, o.Chosen)
			require.Equal(t, tt.chosen, out.Chosen)
			require.Equal(t, tt.escalate, o.Escalate)
			require.Equal(t, tt.step, o.Step)
			if tt.reason != "" {
				require.Equal(t, tt.reason, o.Reason)
			}
			var failed []string
			for _, c := range o.Checks {
				if !c.Passed {
					failed = append(failed, c.Name)
				}
			}
			require.Equal(t, tt.failed, failed)
		})
	}
}

func TestEscalateChecks(t *testing.T) {
	t.Parallel()
	p := mustParse(t, cascadePolicy)
	plan := p.Before(newDecision("t-1", "x", "billing", "technical", "other"), policy.Caller{})
	out := p.After(plan, scored(plan, 0.61, 0.3, 0.09), nil)
	require.Equal(t, []decision.Check{
		{Name: "min_probability", Value: out.Probabilities[0], Threshold: 0.5, Passed: true},
		{Name: "escalate.below", Value: out.Probabilities[0], Threshold: 0.8, Passed: false},
		{Name: "escalate.margin_below", Value: out.Margin, Threshold: 0.2, Passed: true},
	}, out.Outcome.Checks)
	// The scores stay on the result (for the logs), but nothing is chosen.
	require.InDelta(t, 0.61, out.Probabilities[0], 1e-9)
	require.InDelta(t, 0.31, out.Margin, 1e-9)
	require.Empty(t, out.Chosen)
	require.Equal(t, p.Version(), out.Outcome.Policy)
}

// TestStageChain follows a decision through the cascade with Stage.Next:
// it escalates once, and the pool it was sent to settles it by the
// thresholds alone.
func TestStageChain(t *testing.T) {
	t.Parallel()
	p := mustParse(t, cascadePolicy)
	d := newDecision("t-1", "x", "billing", "technical", "other")
	score := func(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
		rs := make([]decision.Result, len(ds))
		for i, d := range ds {
			rs[i] = decision.Result{ID: d.ID, OptionIDs: d.OptionIDs(), Probabilities: []float64{0.5, 0.3, 0.2}}
		}
		return rs, nil
	}

	stage := policy.Stage{Pool: decision.RouteCPU, Pools: bothPools}
	rs, err := p.Apply(context.Background(), policy.Caller{Stage: stage}, []decision.Decision{d}, score)
	require.NoError(t, err)
	require.Equal(t, decision.StatusEscalate, rs[0].Outcome.Status)
	require.Empty(t, rs[0].Chosen)

	next := stage.Next(rs[0].Outcome.Escalate)
	require.Equal(t, policy.Stage{Pool: decision.RouteGPU, Visited: []decision.Route{decision.RouteCPU}, Pools: bothPools}, next)
	rs, err = p.Apply(context.Background(), policy.Caller{Stage: next}, []decision.Decision{d}, score)
	require.NoError(t, err)
	require.Equal(t, decision.StatusDecided, rs[0].Outcome.Status, "on the pool the clause names, the thresholds decide")
	require.Equal(t, "billing", rs[0].Chosen)
	// A third stage back on cpu (a kind of another policy escalating
	// gpu → cpu) never returns to a visited pool.
	third := policy.Stage{Pool: decision.RouteGPU, Visited: []decision.Route{decision.RouteCPU}, Pools: bothPools}
	m := newDecision("m-1", "x", "billing", "technical", "other")
	close := func(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
		return []decision.Result{{ID: ds[0].ID, OptionIDs: ds[0].OptionIDs(), Probabilities: []float64{0.45, 0.4, 0.15}}}, nil
	}
	rs, err = p.Apply(context.Background(), policy.Caller{Stage: third}, []decision.Decision{m}, close)
	require.NoError(t, err)
	require.Equal(t, decision.StatusFallback, rs[0].Outcome.Status)
	require.Equal(t, policy.StepEscalate, rs[0].Outcome.Step)
	require.Contains(t, rs[0].Outcome.Reason, "cannot escalate to cpu, already visited")

	// The zero Stage (first stage, pool unknown) escalates; its Next does not
	// list an unknown pool as visited, and stops at the target pool.
	require.Equal(t, policy.Stage{Pool: decision.RouteGPU}, policy.Stage{}.Next(decision.RouteGPU))
	// Next copies: the stage it came from keeps its own list.
	from := policy.Stage{Pool: decision.RouteGPU, Visited: make([]decision.Route, 1, 4)}
	from.Visited[0] = decision.RouteCPU
	n := from.Next(decision.RouteCPU)
	n.Visited[0] = "changed"
	require.Equal(t, []decision.Route{decision.RouteCPU}, from.Visited)
	require.Equal(t, []decision.Route{"changed", decision.RouteGPU}, n.Visited)
	// A pool already listed is not listed twice.
	require.Equal(t, []decision.Route{decision.RouteCPU}, policy.Stage{Pool: decision.RouteCPU, Visited: []decision.Route{decision.RouteCPU}}.Next(decision.RouteGPU).Visited)
}

func TestAfterRejectsEscalatePlans(t *testing.T) {
	t.Parallel()
	p := mustParse(t, cascadePolicy)
	d := newDecision("t-1", "x", "billing", "technical", "other")
	for _, o := range []decision.Outcome{
		{Status: decision.StatusEscalate, Escalate: decision.RouteGPU},
		{Status: decision.StatusReview, Escalate: decision.RouteGPU},
	} {
		r := p.After(policy.Plan{Decision: d, Kind: "support", Outcome: &o}, decision.Result{}, nil)
		require.Equal(t, decision.StatusError, r.Outcome.Status)
		require.Empty(t, r.Outcome.Escalate)
	}
}

// bothPools is what a worker with both pools' queues can send to.
var bothPools = []decision.Route{decision.RouteCPU, decision.RouteGPU}

// A caller that names no pools it can send to (verdict serve, score,
// batch, eval) never escalates: the kind's fallback applies.
func TestNoEscalationWithoutAPoolToSendTo(t *testing.T) {
	t.Parallel()
	p := mustParse(t, cascadePolicy)
	d := newDecision("t-1", "x", "billing", "technical", "other")
	for _, st := range []policy.Stage{{}, {Pool: decision.RouteCPU}, {Pool: decision.RouteCPU, Pools: []decision.Route{decision.RouteCPU}}} {
		plan := p.Before(d, policy.Caller{Stage: st})
		r := p.After(plan, decision.Result{OptionIDs: d.OptionIDs(), Probabilities: []float64{0.55, 0.4, 0.05}}, nil)
		require.NotEqual(t, decision.StatusEscalate, r.Outcome.Status, "%+v", st)
		require.Equal(t, policy.StepEscalate, r.Outcome.Step)
		require.Contains(t, r.Outcome.Reason, "cannot escalate to gpu")
		require.Empty(t, r.Outcome.Escalate)
	}
}

// TestCheckPools: a deployment refuses, at load and on reload, a policy
// that escalates to a pool it does not run or that has one pool only (it
// would escalate to itself), naming each clause's path and line.
func TestCheckPools(t *testing.T) {
	t.Parallel()
	p := mustParse(t, cascadePolicy)
	both := []decision.Route{decision.RouteCPU, decision.RouteGPU}
	require.NoError(t, p.CheckPools(both, true))
	require.NoError(t, policy.Default().CheckPools([]decision.Route{decision.RouteCPU}, true), "a policy without escalate clauses fits any deployment")

	err := p.CheckPools([]decision.Route{decision.RouteCPU}, true)
	require.ErrorIs(t, err, policy.ErrInvalid)
	var le *policy.LoadError
	require.ErrorAs(t, err, &le)
	require.Equal(t, []policy.FieldError{
		{Path: "kinds.support.escalate.to", Line: 9, Message: "pool gpu is not run here (pools: cpu)"},
		{Path: "kinds.margin-only.escalate.to", Line: 14, Message: "cpu is the only pool: a pool cannot escalate to itself"},
	}, le.Errors)

	// A worker reaches its own pool and its escalation queues, not the
	// whole deployment: the gpu worker, last stage of "to: gpu", is fine.
	require.NoError(t, mustParse(t, "kinds: {default: {escalate: {below: 0.9, to: gpu}}}\n").CheckPools([]decision.Route{decision.RouteGPU}, false))
	require.ErrorContains(t, p.CheckPools([]decision.Route{decision.RouteCPU}, false), "kinds.support.escalate.to: pool gpu is not run here (pools: cpu)")

	// The default kind is checked once, declared or not.
	d := mustParse(t, "kinds: {default: {escalate: {below: 0.9, to: gpu}}}\n")
	require.ErrorContains(t, d.CheckPools([]decision.Route{decision.RouteGPU}, true), "kinds.default.escalate.to: gpu is the only pool")
	require.Len(t, func() []policy.FieldError {
		var le *policy.LoadError
		require.ErrorAs(t, d.CheckPools([]decision.Route{decision.RouteCPU}, true), &le)
		return le.Errors
	}(), 1)
}

func TestHolderRequirePools(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cascadePolicy), 0o644))
	h, err := policy.NewHolder(path)
	require.NoError(t, err)
	err = h.RequirePools([]decision.Route{decision.RouteGPU}, true)
	require.ErrorIs(t, err, policy.ErrInvalid)
	require.ErrorContains(t, err, path+": kinds.support.escalate.to: gpu is the only pool")

	require.NoError(t, h.RequirePools([]decision.Route{decision.RouteCPU, decision.RouteGPU}, true))
	v := h.Current().Version()
	require.NoError(t, os.WriteFile(path, []byte("kinds: {x: {escalate: {below: 0.5, to: gpu}}}\n"), 0o644))
	require.NoError(t, h.Reload(), "gpu is run here")
	require.NotEqual(t, v, h.Current().Version())

	h2, err := policy.NewHolder(path)
	require.NoError(t, err)
	require.NoError(t, h2.RequirePools([]decision.Route{decision.RouteGPU, decision.RouteCPU}, true))
	h3, err := policy.NewHolder(path)
	require.NoError(t, err)
	require.Error(t, h3.RequirePools([]decision.Route{decision.RouteCPU}, true))
	require.NoError(t, h2.RequirePools([]decision.Route{decision.RouteCPU, decision.RouteGPU}, true))
	held := h2.Current().Version()
	require.NoError(t, os.WriteFile(path, []byte("kinds: {x: {escalate: {below: 0.5, to: gpu}}}\ndefault_kind: x\n"), 0o644))
	require.NoError(t, h2.Reload())
	require.NotEqual(t, held, h2.Current().Version())
}
