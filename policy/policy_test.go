package policy_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

func mustParse(t testing.TB, y string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(y))
	require.NoError(t, err)
	return p
}

var ticketOptions = []string{"billing", "technical", "account", "other"}

// newDecision builds a decision with a text state (or a JSON state when
// state starts with '{').
func newDecision(id, state string, opts ...string) decision.Decision {
	d := decision.Decision{ID: id, Question: "Which team should handle this ticket?"}
	if len(state) > 0 && state[0] == '{' {
		d.State = decision.State{JSON: json.RawMessage(state)}
	} else {
		d.State = decision.TextState(state)
	}
	if len(opts) == 0 {
		opts = ticketOptions
	}
	for _, o := range opts {
		d.Options = append(d.Options, decision.Option{ID: o, Description: o + " team"})
	}
	return d
}

// scored fakes the engine's result for a plan: logits are log(probs), so
// the probabilities at temperature 1 are exactly probs.
func scored(plan policy.Plan, probs ...float64) decision.Result {
	logits := make([]float64, len(probs))
	for i, p := range probs {
		logits[i] = math.Log(p)
	}
	// The temperature the scorer applied (package tune takes the kind's
	// from plan.Decision when no calibration file overrides it).
	return decision.Result{ID: plan.Decision.ID, OptionIDs: plan.Decision.OptionIDs(), OptionLogits: logits, Temperature: plan.Decision.KindTemperature}
}

const authPolicy = `
kinds:
  support-route:
    match: [{id: '^ticket-'}]
    options: [billing, technical, account, other]
    rules:
      - {name: chargeback, when: 'state.contains("chargeback")', option: billing}
  other-kind: {}
authorization:
  mode: filter
  unlisted: refuse
  callers:
    - {name: helpdesk, tenant: acme, kinds: [support-route], options: [billing, technical, other]}
    - {name: partner, tenant: partner, options: [technical, other], mode: refuse}
    - {name: narrow, tenant: narrow, options: [other]}
    - {name: bot, api_key: bot-secret-key}
    - {name: acme-bot, tenant: acme, api_key: acme-secret-key, options: [account, other]}
`

func TestBefore(t *testing.T) {
	t.Parallel()
	ticket := mustParse(t, ticketPolicy)
	auth := mustParse(t, authPolicy)
	costly := mustParse(t, `
rule_cost_limit: 50
kinds: {default: {rules: [{name: scan, when: 'state.contains("needle")', option: a}], on_error: abstain}}
`)
	strict := mustParse(t, `
unknown_kind: refuse
kinds: {a: {}}
`)
	tests := []struct {
		name      string
		p         *policy.Policy
		d         decision.Decision
		c         policy.Caller
		kind      string
		status    decision.Status // "" when the plan goes to the model
		chosen    string
		step      string
		rule      string
		options   []string // options left to score
		removed   []string
		reasonHas string
	}{
		{name: "no rule matches", p: ticket, d: newDecision("ticket-1", "my screen is blank"), kind: "support-route", options: ticketOptions},
		{name: "rule hit", p: ticket, d: newDecision("ticket-1", "I filed a Chargeback"), kind: "support-route", status: decision.StatusRule, chosen: "billing", step: "rule", rule: "chargeback", reasonHas: `rule "chargeback" matched: billing`},
		{name: "rule hit on JSON state", p: ticket, d: newDecision("ticket-2", `{"outage":true,"plan":"enterprise"}`), kind: "support-route", status: decision.StatusRule, chosen: "technical", rule: "enterprise-outage", step: "rule"},
		{name: "JSON rule does not match", p: ticket, d: newDecision("ticket-2", `{"outage":false,"plan":"enterprise"}`), kind: "support-route", options: ticketOptions},
		{name: "rule on decision metadata", p: ticket, d: func() decision.Decision {
			d := newDecision("ticket-3", "hello")
			d.Metadata = map[string]string{"channel": "legal"}
			return d
		}(), kind: "support-route", status: decision.StatusRule, chosen: "account", rule: "legal", step: "rule"},
		{name: "rule on caller metadata", p: ticket, d: newDecision("ticket-3", "hello"), c: policy.Caller{Metadata: map[string]string{"team": "legal"}}, kind: "support-route", status: decision.StatusRule, chosen: "account", rule: "legal", step: "rule"},
		{name: "first matching rule wins", p: ticket, d: func() decision.Decision {
			d := newDecision("ticket-3", "chargeback")
			d.Metadata = map[string]string{"channel": "legal"}
			return d
		}(), kind: "support-route", status: decision.StatusRule, chosen: "billing", rule: "chargeback", step: "rule"},
		{name: "kind by question pattern", p: ticket, d: newDecision("x", "chargeback"), kind: "support-route", status: decision.StatusRule, chosen: "billing", step: "rule", rule: "chargeback"},
		{name: "default kind", p: ticket, d: func() decision.Decision {
			d := newDecision("x", "chargeback", "yes", "no")
			d.Question = "Is this urgent?"
			return d
		}(), kind: "default", options: []string{"yes", "no"}},
		{name: "explicit kind", p: ticket, d: func() decision.Decision {
			d := newDecision("ticket-9", "chargeback")
			d.Kind = "default"
			return d
		}(), kind: "default", options: ticketOptions},
		{name: "unknown kind uses default", p: ticket, d: func() decision.Decision {
			d := newDecision("ticket-9", "x")
			d.Kind = "nope"
			return d
		}(), kind: "default", options: ticketOptions},
		{name: "unknown kind refused", p: strict, d: func() decision.Decision {
			d := newDecision("t", "x")
			d.Kind = "nope"
			return d
		}(), kind: "nope", status: decision.StatusRefused, step: "kind", reasonHas: `kind "nope" is not configured`},
		{name: "undeclared option refused", p: ticket, d: newDecision("ticket-1", "x", "billing", "refund"), kind: "support-route", status: decision.StatusRefused, step: "kind", reasonHas: `option "refund" not declared by kind "support-route"`},
		{name: "rule error goes to on_error", p: costly, d: newDecision("d", strings.Repeat("hay ", 500), "a", "b"), kind: "default", status: decision.StatusAbstained, step: "rule", rule: "scan", reasonHas: "cost limit exceeded"},
		{name: "rule runtime error", p: mustParse(t, `kinds: {default: {rules: [{name: amount, when: 'json.amount > 10', option: a}]}}`), d: newDecision("d", `{"other":1}`, "a", "b"), kind: "default", status: decision.StatusError, step: "rule", rule: "amount", reasonHas: "no such key"},
		{name: "rule returns non-bool", p: mustParse(t, `kinds: {default: {rules: [{name: dyn, when: 'json.flag', option: a}], on_error: review}}`), d: newDecision("d", `{"flag":"yes"}`, "a", "b"), kind: "default", status: decision.StatusReview, step: "rule", rule: "dyn", reasonHas: "not a boolean"},

		// authorization
		{name: "filter removes options", p: auth, d: newDecision("ticket-1", "hi"), c: policy.Caller{Tenant: "acme"}, kind: "support-route", options: []string{"billing", "technical", "other"}, removed: []string{"account"}},
		{name: "filter then rule", p: auth, d: newDecision("ticket-1", "chargeback"), c: policy.Caller{Tenant: "acme"}, kind: "support-route", status: decision.StatusRule, chosen: "billing", step: "rule", rule: "chargeback", options: []string{"billing", "technical", "other"}, removed: []string{"account"}},
		{name: "rule option filtered away abstains", p: auth, d: newDecision("ticket-1", "chargeback"), c: policy.Caller{APIKey: "acme-secret-key", Tenant: "acme"}, kind: "support-route", status: decision.StatusAbstained, step: "rule", rule: "chargeback", options: []string{"account", "other"}, removed: []string{"billing", "technical"}, reasonHas: "not among the decision's allowed options"},
		{name: "refuse mode", p: auth, d: newDecision("ticket-1", "hi"), c: policy.Caller{Tenant: "partner"}, kind: "support-route", status: decision.StatusRefused, step: "authorization", reasonHas: `caller partner may not receive option "billing", "account"`},
		{name: "refuse mode all allowed", p: auth, d: newDecision("ticket-1", "hi", "technical", "other"), c: policy.Caller{Tenant: "partner"}, kind: "support-route", options: []string{"technical", "other"}},
		{name: "kind not allowed", p: auth, d: func() decision.Decision {
			d := newDecision("x", "hi", "a", "b")
			d.Kind = "other-kind"
			return d
		}(), c: policy.Caller{Tenant: "acme"}, kind: "other-kind", status: decision.StatusRefused, step: "authorization", reasonHas: `may not receive decisions of kind "other-kind"`},
		{name: "unlisted refused", p: auth, d: newDecision("ticket-1", "hi"), c: policy.Caller{Tenant: "stranger"}, kind: "support-route", status: decision.StatusRefused, step: "authorization", reasonHas: "not listed"},
		{name: "api key grant", p: auth, d: newDecision("ticket-1", "hi"), c: policy.Caller{APIKey: "bot-secret-key", Tenant: "whoever"}, kind: "support-route", options: ticketOptions},
		{name: "wrong api key", p: auth, d: newDecision("ticket-1", "hi"), c: policy.Caller{APIKey: "bot-secret-kez"}, kind: "support-route", status: decision.StatusRefused, step: "authorization"},
		{name: "fewer than two left", p: auth, d: newDecision("ticket-1", "hi"), c: policy.Caller{Tenant: "narrow"}, kind: "support-route", status: decision.StatusRefused, step: "authorization", removed: []string{"billing", "technical", "account"}, reasonHas: "at least 2 are needed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := tt.d.OptionIDs()
			plan := tt.p.Before(tt.d, tt.c)
			require.Equal(t, before, tt.d.OptionIDs(), "Before must not modify the caller's decision")
			require.Equal(t, tt.kind, plan.Kind)
			require.Equal(t, tt.removed, plan.Removed)
			if tt.options != nil {
				require.Equal(t, tt.options, plan.Decision.OptionIDs())
			}
			if tt.status == "" {
				require.Nil(t, plan.Outcome, "%+v", plan.Outcome)
				require.Zero(t, plan.Temperature, "no kind temperature configured")
				require.Zero(t, plan.Decision.KindTemperature)
				return
			}
			require.NotNil(t, plan.Outcome)
			o := plan.Outcome
			require.Equal(t, tt.status, o.Status, o.Reason)
			require.Equal(t, tt.chosen, o.Chosen)
			require.Equal(t, tt.step, o.Step)
			require.Equal(t, tt.rule, o.Rule)
			require.Equal(t, tt.removed, o.Removed)
			require.Equal(t, tt.p.Version(), o.Policy)
			require.Contains(t, o.Reason, tt.reasonHas)

			// After passes a settled plan through unchanged, without scores.
			r := tt.p.After(plan, decision.Result{}, nil)
			require.Equal(t, o, r.Outcome)
			require.Equal(t, tt.chosen, r.Chosen)
			require.Equal(t, tt.d.ID, r.ID)
		})
	}
}

func TestAfter(t *testing.T) {
	t.Parallel()
	base := `
kinds:
  support-route:
    match: [{id: '^ticket-'}]
    options: [billing, technical, account, other]
    min_probability: 0.6
    min_margin: 0.3
    option_min: {account: 0.8}
    fallback: %s
    on_error: %s
`
	policyWith := func(fallback, onError string) *policy.Policy {
		return mustParse(t, sprintf(base, fallback, onError))
	}
	review := policyWith("review", "review")
	abstain := policyWith("abstain", "error")
	toOther := policyWith("{option: other}", "{option: other}")
	hot := mustParse(t, "kinds: {default: {temperature: 2, min_probability: 0.65}}\n")
	noThresholds := policy.Default()

	engineErr := errors.New("engine: unavailable")
	tests := []struct {
		name     string
		p        *policy.Policy
		caller   policy.Caller
		d        decision.Decision
		result   func(policy.Plan) decision.Result
		scoreErr error
		status   decision.Status
		chosen   string
		step     string
		checks   []string // names of failed checks
		reason   string
	}{
		{name: "decided", p: review, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0.7, 0.2, 0.05, 0.05) }, status: decision.StatusDecided, chosen: "billing", step: "model", reason: "model chose billing with p=0.7, margin 0.5; thresholds passed"},
		{name: "min_probability fails to review", p: review, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0.5, 0.1, 0.2, 0.2) }, status: decision.StatusReview, step: "threshold", checks: []string{"min_probability"}, reason: "min_probability 0.5 < 0.6; routed to review"},
		{name: "min_probability fails to abstain", p: abstain, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0.5, 0.1, 0.2, 0.2) }, status: decision.StatusAbstained, step: "threshold", checks: []string{"min_probability"}},
		{name: "min_probability fails to option", p: toOther, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0.5, 0.1, 0.2, 0.2) }, status: decision.StatusFallback, chosen: "other", step: "threshold", checks: []string{"min_probability"}, reason: "fallback other"},
		{name: "fallback option unavailable abstains", p: toOther, d: newDecision("ticket-1", "x", "billing", "technical"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0.55, 0.45) }, status: decision.StatusAbstained, step: "threshold", checks: []string{"min_probability", "min_margin"}, reason: `fallback option "other" is not among`},
		{name: "margin fails", p: review, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0.62, 0.38, 0, 0) }, status: decision.StatusReview, step: "threshold", checks: []string{"min_margin"}},
		{name: "option minimum fails", p: review, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0.1, 0.1, 0.75, 0.05) }, status: decision.StatusReview, step: "threshold", checks: []string{"option_min:account"}},
		{name: "option minimum passes", p: review, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0.05, 0.05, 0.85, 0.05) }, status: decision.StatusDecided, chosen: "account", step: "model"},
		{name: "threshold equal passes", p: review, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result {
			r := scored(pl)
			r.OptionLogits = nil
			r.Probabilities = []float64{0.6, 0.25, 0.1, 0.05}
			return r
		}, status: decision.StatusDecided, chosen: "billing", step: "model"},
		{name: "no thresholds decides argmax", p: noThresholds, d: newDecision("q", "x", "a", "b", "c"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0.34, 0.33, 0.33) }, status: decision.StatusDecided, chosen: "a", step: "model", reason: "model chose a with p=0.34, margin 0.01"},
		{name: "tie picks the first", p: noThresholds, d: newDecision("q", "x", "a", "b"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0.5, 0.5) }, status: decision.StatusDecided, chosen: "a", step: "model"},
		{name: "temperature softens below threshold", p: hot, d: newDecision("q", "x", "a", "b"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0.75, 0.25) }, status: decision.StatusAbstained, step: "threshold", checks: []string{"min_probability"}, reason: "p=0.634 but min_probability 0.634 < 0.65"},

		// scoring failures
		{name: "score error on_error review", p: review, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result { return decision.Result{} }, scoreErr: engineErr, status: decision.StatusReview, step: "on_error", reason: "scoring failed: engine: engine: unavailable; routed to review"},
		{name: "score error default error", p: noThresholds, d: newDecision("q", "x", "a", "b"), result: func(pl policy.Plan) decision.Result { return decision.Result{} }, scoreErr: engineErr, status: decision.StatusError, step: "on_error"},
		{name: "result error on_error option", p: toOther, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result {
			r := scored(pl, 0.9, 0.05, 0.03, 0.02)
			r.Error = &decision.Error{Code: "busy", Message: "engine busy", Retryable: true}
			return r
		}, status: decision.StatusFallback, chosen: "other", step: "on_error", reason: "scoring failed: busy: engine busy; fallback other"},
		{name: "result error with scores never decides", p: abstain, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result {
			r := scored(pl, 0.97, 0.01, 0.01, 0.01)
			r.Error = &decision.Error{Code: "engine", Message: "boom"}
			return r
		}, status: decision.StatusError, step: "on_error"},
		{name: "mismatched options", p: review, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result {
			r := scored(pl, 0.97, 0.01, 0.01, 0.01)
			r.OptionIDs = []string{"billing", "technical", "account", "refund"}
			return r
		}, status: decision.StatusReview, step: "on_error", reason: "do not match the planned options"},
		{name: "wrong number of logits", p: noThresholds, d: newDecision("q", "x", "a", "b"), result: func(pl policy.Plan) decision.Result {
			r := scored(pl, 0.9)
			r.OptionIDs = nil
			return r
		}, status: decision.StatusError, step: "on_error", reason: "1 option_logits and 0 probabilities for 2 options"},
		{name: "NaN logit", p: noThresholds, d: newDecision("q", "x", "a", "b"), result: func(pl policy.Plan) decision.Result {
			r := scored(pl, 0.9, 0.1)
			r.OptionLogits[1] = math.NaN()
			return r
		}, status: decision.StatusError, step: "on_error", reason: "option_logits[1] is NaN"},
		{name: "all -Inf logits", p: noThresholds, d: newDecision("q", "x", "a", "b"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0, 0) }, status: decision.StatusError, step: "on_error", reason: "every option has zero probability"},
		{name: "overflowing logits", p: mustParse(t, "kinds: {default: {temperature: 0.5}}\n"), d: newDecision("q", "x", "a", "b"), result: func(pl policy.Plan) decision.Result {
			return decision.Result{OptionLogits: []float64{math.MaxFloat64, 0}, Temperature: pl.Decision.KindTemperature}
		}, status: decision.StatusError, step: "on_error", reason: "scores overflow at temperature 0.5"},
		{name: "probabilities not summing to one", p: noThresholds, d: newDecision("q", "x", "a", "b"), result: func(pl policy.Plan) decision.Result {
			return decision.Result{Probabilities: []float64{0.9, 0.9}}
		}, status: decision.StatusError, step: "on_error", reason: "probabilities sum to 1.8"},
		{name: "filtered plan", p: mustParse(t, authPolicy), caller: policy.Caller{Tenant: "acme"}, d: newDecision("ticket-1", "x"), result: func(pl policy.Plan) decision.Result { return scored(pl, 0.1, 0.8, 0.1) }, status: decision.StatusDecided, chosen: "technical", step: "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan := tt.p.Before(tt.d, tt.caller)
			require.Nil(t, plan.Outcome)
			r := tt.p.After(plan, tt.result(plan), tt.scoreErr)
			require.NotNil(t, r.Outcome)
			o := r.Outcome
			require.Equal(t, tt.status, o.Status, o.Reason)
			require.Equal(t, tt.chosen, o.Chosen)
			require.Equal(t, tt.chosen, r.Chosen, "Result.Chosen follows the outcome")
			require.Equal(t, tt.step, o.Step)
			require.Equal(t, tt.p.Version(), o.Policy)
			require.Equal(t, plan.Removed, o.Removed)
			require.Contains(t, o.Reason, tt.reason)
			require.Equal(t, tt.d.ID, r.ID)
			var failed []string
			for _, c := range o.Checks {
				require.Equal(t, c.Value >= c.Threshold, c.Passed, "%+v", c)
				if !c.Passed {
					failed = append(failed, c.Name)
				}
			}
			require.Equal(t, tt.checks, failed)
			if tt.scoreErr != nil {
				require.NotNil(t, r.Error)
			}
			if o.Status == decision.StatusDecided {
				require.Nil(t, r.Error)
				sum := 0.0
				for _, p := range r.Probabilities {
					sum += p
				}
				require.InDelta(t, 1, sum, 1e-9)
				require.Greater(t, r.Temperature, 0.0)
				require.Equal(t, decision.Confidence(r.Probabilities), r.Confidence)
			} else if o.Step == "on_error" {
				require.Zero(t, r.Confidence)
				require.Zero(t, r.Margin)
			}
		})
	}
}

// TestAfterKeepsTheScorersTemperature: Before hands the kind's temperature
// to the scorer through the plan's decision; After recomputes at the
// temperature the result was scored at and never applies a second one (the
// bug where the kind's temperature, default 1, replaced --temperature).
func TestAfterKeepsTheScorersTemperature(t *testing.T) {
	t.Parallel()
	p := mustParse(t, "kinds: {default: {temperature: 2, debias: 3}}\n")
	d := newDecision("q", "x", "a", "b")
	plan := p.Before(d, policy.Caller{})
	require.Equal(t, 2.0, plan.Temperature)
	require.Equal(t, 2.0, plan.Decision.KindTemperature)
	require.Equal(t, 3, plan.Decision.KindDebias)
	require.Zero(t, d.KindTemperature, "the caller's decision is not modified")
	r := p.After(plan, decision.Result{OptionIDs: []string{"a", "b"}, OptionLogits: []float64{2, 0}, Temperature: 2}, nil)
	want := 1 / (1 + math.Exp(-1)) // softmax([1, 0]): logits divided by 2
	require.InDelta(t, want, r.Probabilities[0], 1e-12)
	require.InDelta(t, 2*want-1, r.Margin, 1e-12)
	require.Equal(t, 2.0, r.Temperature)

	// A result scored at 4 (say, by --temperature under a calibration-free
	// precedence) stays at 4.
	r = p.After(plan, decision.Result{OptionIDs: []string{"a", "b"}, OptionLogits: []float64{4, 0}, Temperature: 4}, nil)
	require.InDelta(t, want, r.Probabilities[0], 1e-12)
	require.Equal(t, 4.0, r.Temperature)

	// Without logits the probabilities are kept as scored.
	r = p.After(plan, decision.Result{Probabilities: []float64{0.6, 0.4}, Temperature: 3}, nil)
	require.Equal(t, []float64{0.6, 0.4}, r.Probabilities)

	// Without a temperature on the result, 1.
	r = policy.Default().After(policy.Default().Before(d, policy.Caller{}), decision.Result{OptionLogits: []float64{1, 0}}, nil)
	require.Equal(t, 1.0, r.Temperature)
}

func TestNilPolicyFailsClosed(t *testing.T) {
	t.Parallel()
	var p *policy.Policy
	plan := p.Before(newDecision("q", "x", "a", "b"), policy.Caller{})
	require.NotNil(t, plan.Outcome)
	require.Equal(t, decision.StatusRefused, plan.Outcome.Status)
	require.Contains(t, plan.Outcome.Reason, "policy.Default()")

	plan.Outcome = nil
	r := p.After(plan, decision.Result{OptionIDs: []string{"a", "b"}, OptionLogits: []float64{5, 0}, Chosen: "a", Confidence: 0.9}, nil)
	require.Equal(t, decision.StatusError, r.Outcome.Status)
	require.Empty(t, r.Chosen)
	require.Zero(t, r.Confidence)
	require.Nil(t, p.Kinds())
}

func TestAfterRejectsForeignPlans(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	d := newDecision("q", "x", "a", "b")
	res := decision.Result{OptionIDs: []string{"a", "b"}, OptionLogits: []float64{5, 0}}

	// A plan that did not come from Before: no kind.
	r := p.After(policy.Plan{Decision: d}, res, nil)
	require.Equal(t, decision.StatusError, r.Outcome.Status)
	require.Contains(t, r.Outcome.Reason, "make plans with Before")
	require.Empty(t, r.Chosen)

	// A hand-made outcome cannot claim decided, nor an option not offered.
	r = p.After(policy.Plan{Decision: d, Kind: "default", Outcome: &decision.Outcome{Status: decision.StatusDecided, Chosen: "a"}}, res, nil)
	require.Equal(t, decision.StatusError, r.Outcome.Status)
	r = p.After(policy.Plan{Decision: d, Kind: "default", Outcome: &decision.Outcome{Status: decision.StatusRule, Chosen: "zzz"}}, res, nil)
	require.Equal(t, decision.StatusError, r.Outcome.Status)
	require.Empty(t, r.Chosen)

	// Plan from another policy whose kind this one lacks.
	other := mustParse(t, "kinds: {special: {match: [{id: '^q'}]}}\n")
	plan := other.Before(d, policy.Caller{})
	require.Equal(t, "special", plan.Kind)
	r = p.After(plan, res, nil)
	require.Equal(t, decision.StatusError, r.Outcome.Status)
}

func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	d := newDecision("q", "x", "a", "b", "c")
	d.Kind = "anything"
	plan := p.Before(d, policy.Caller{Tenant: "t"})
	require.Nil(t, plan.Outcome)
	require.Equal(t, "default", plan.Kind)
	require.Equal(t, d, plan.Decision)
	r := p.After(plan, decision.Result{OptionIDs: d.OptionIDs(), OptionLogits: []float64{0, 3, 1}}, nil)
	require.Equal(t, decision.StatusDecided, r.Outcome.Status)
	require.Equal(t, "b", r.Chosen)
	require.Empty(t, r.Outcome.Checks)
	require.Equal(t, "default", r.Outcome.Policy)
}

// TestConcurrentUse shares one policy with rules between goroutines; run
// with -race.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	p := mustParse(t, ticketPolicy)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				state := "screen is blank"
				if (g+i)%3 == 0 {
					state = "chargeback filed"
				}
				plan := p.Before(newDecision("ticket-1", state), policy.Caller{Tenant: "t"})
				r := p.After(plan, scored(plan, 0.7, 0.2, 0.05, 0.05), nil)
				want := decision.StatusDecided
				if (g+i)%3 == 0 {
					want = decision.StatusRule
				}
				if r.Outcome.Status != want || r.Chosen != "billing" {
					t.Errorf("goroutine %d step %d: %+v", g, i, r.Outcome)
					return
				}
			}
		}()
	}
	wg.Wait()
}
