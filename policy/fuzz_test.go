package policy_test

import (
	"errors"
	"os"
	"testing"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

// FuzzParse feeds arbitrary bytes to the loader: it must never panic or
// hang, every rejection must be a *LoadError with at least one problem, and
// every accepted policy must settle a decision safely.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("../examples/policy.yaml"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		ticketPolicy,
		authPolicy,
		policyV1,
		"",
		"version: 1\n",
		"kinds: {a: {options: [x, y], fallback: {option: x}, rules: [{when: 'state.contains(\"x\")', option: y}]}}\n",
		"kinds:\n  a: &k {min_probability: 0.5}\n  b: *k\n",
		"a: &a [*a]\n",
		"<<: {version: 1}\n",
		"kinds: {a: {rules: [{when: '[1,2,3].map(x, [x, x]).size() > 0', option: x}]}}\n",
		"kinds: {a: {match: [{id: '(a+)+$'}]}}\n",
		"authorization: {callers: [{tenant: t, options: [x]}], unlisted: {options: [x, y]}}\n",
		"kinds: {a: {escalate: {below: 0.8, margin_below: 0.2, to: gpu}, fallback: review}}\n",
		"kinds: {a: {escalate: {below: 2, to: tpu, x: 1}}}\n",
		"temperature: 1e309\n",
		"rule_cost_limit: 99999999999999999999\n",
		"\t- broken",
	} {
		f.Add([]byte(s))
	}
	d := newDecision("k-1", "text with chargeback", "billing", "technical", "x", "y")
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := policy.Parse(data)
		if err != nil {
			var le *policy.LoadError
			if !errors.As(err, &le) || !errors.Is(err, policy.ErrInvalid) || len(le.Errors) == 0 {
				t.Fatalf("error is not a LoadError with problems: %v", err)
			}
			for _, fe := range le.Errors {
				if fe.Message == "" {
					t.Fatalf("problem without message: %+v", fe)
				}
			}
			if p != nil {
				t.Fatal("policy returned with an error")
			}
			return
		}
		if len(p.Version()) != 64 {
			t.Fatalf("version %q", p.Version())
		}
		for _, c := range []policy.Caller{{}, {Tenant: "t"}, {APIKey: "secret-key-1"}, {Stage: policy.Stage{Pool: decision.RouteGPU}}} {
			plan := p.Before(d, c)
			r := p.After(plan, decision.Result{OptionLogits: []float64{1, 2, 3, 4}[:len(plan.Decision.Options)]}, nil)
			o := r.Outcome
			if o == nil || o.Status == "" || o.Step == "" {
				t.Fatalf("incomplete outcome %+v", o)
			}
			if (o.Status == decision.StatusEscalate) != (o.Escalate != "") || o.Escalate == c.Stage.Pool && o.Escalate != "" {
				t.Fatalf("escalate outcome %+v at stage %+v", o, c.Stage)
			}
			if o.Chosen != "" && !contains(plan.Decision.OptionIDs(), o.Chosen) {
				t.Fatalf("chosen %q not among %v", o.Chosen, plan.Decision.OptionIDs())
			}
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
