package policy_test

import (
	"fmt"
	"math"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

func Example() {
	p, err := policy.Parse([]byte(`
kinds:
  support-route:
    match: [{id: '^ticket-'}]
    options: [billing, technical, other]
    min_probability: 0.6
    rules:
      - name: chargeback
        when: 'state.lowerAscii().contains("chargeback")'
        option: billing
    fallback: review
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	caller := policy.Caller{Tenant: "acme"}
	options := []decision.Option{{ID: "billing"}, {ID: "technical"}, {ID: "other"}}

	// A rule settles the first decision before the model runs.
	plan := p.Before(decision.Decision{ID: "ticket-1", State: decision.TextState("I will file a chargeback!"), Question: "Which team?", Options: options}, caller)
	fmt.Println(plan.Kind, plan.Outcome.Status, plan.Outcome.Chosen, "-", plan.Outcome.Reason)

	// The second goes to the model; the scores come back through After.
	plan = p.Before(decision.Decision{ID: "ticket-2", State: decision.TextState("The app crashes on start."), Question: "Which team?", Options: options}, caller)
	scores := decision.Result{OptionIDs: plan.Decision.OptionIDs(), OptionLogits: []float64{math.Log(0.1), math.Log(0.8), math.Log(0.1)}}
	r := p.After(plan, scores, nil)
	fmt.Println(r.Outcome.Status, r.Chosen, "-", r.Outcome.Reason)

	// Too close to call: the threshold fails and the fallback routes it to review.
	scores.OptionLogits = []float64{math.Log(0.45), math.Log(0.4), math.Log(0.15)}
	r = p.After(plan, scores, nil)
	fmt.Println(r.Outcome.Status, r.Outcome.Step, "-", r.Outcome.Reason)
	// Output:
	// support-route rule billing - rule "chargeback" matched: billing
	// decided technical - model chose technical with p=0.8, margin 0.7; thresholds passed
	// review threshold - model chose billing with p=0.45 but min_probability 0.45 < 0.6; routed to review
}

func ExampleDefault() {
	p := policy.Default() // no file: the model's argmax decides
	d := decision.Decision{ID: "q1", State: decision.TextState("..."), Question: "Spam?", Options: []decision.Option{{ID: "yes"}, {ID: "no"}}}
	plan := p.Before(d, policy.Caller{})
	r := p.After(plan, decision.Result{OptionIDs: d.OptionIDs(), OptionLogits: []float64{-1, 2}}, nil)
	fmt.Println(r.Outcome.Status, r.Chosen, r.Outcome.Policy)
	// Output: decided no default
}
