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

// A cascade: the small model on the cpu pool scores first; a result it is
// unsure of escalates to the gpu pool, where the big model settles it.
func ExampleStage() {
	p, err := policy.Parse([]byte(`
kinds:
  support-route:
    options: [billing, technical, other]
    escalate: {below: 0.8, margin_below: 0.2, to: gpu}
    fallback: review
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	d := decision.Decision{ID: "ticket-3", Kind: "support-route", State: decision.TextState("Charged twice after the app crashed."), Question: "Which team?",
		Options: []decision.Option{{ID: "billing"}, {ID: "technical"}, {ID: "other"}}}

	// A worker on the cpu pool that can send decisions to both pools.
	small := policy.Stage{Pool: decision.RouteCPU, Pools: []decision.Route{decision.RouteCPU, decision.RouteGPU}}
	plan := p.Before(d, policy.Caller{Stage: small})
	r := p.After(plan, decision.Result{OptionIDs: d.OptionIDs(), Probabilities: []float64{0.55, 0.4, 0.05}}, nil)
	fmt.Println(r.Outcome.Status, r.Outcome.Escalate, "-", r.Outcome.Reason)

	// The worker sends it on to the gpu pool's queue, with the next stage.
	big := small.Next(r.Outcome.Escalate)
	plan = p.Before(d, policy.Caller{Stage: big})
	r = p.After(plan, decision.Result{OptionIDs: d.OptionIDs(), Probabilities: []float64{0.9, 0.08, 0.02}}, nil)
	fmt.Println(r.Outcome.Status, r.Chosen, "-", r.Outcome.Reason)

	// On the pool the clause names, the big model's answer meets the
	// thresholds alone (this kind has none).
	r = p.After(plan, decision.Result{OptionIDs: d.OptionIDs(), Probabilities: []float64{0.55, 0.4, 0.05}}, nil)
	fmt.Println(r.Outcome.Status, r.Chosen, "-", r.Outcome.Reason)

	// A decision already scored on the gpu pool never goes back to it.
	back := policy.Stage{Pool: decision.RouteCPU, Visited: []decision.Route{decision.RouteGPU}, Pools: small.Pools}
	plan = p.Before(d, policy.Caller{Stage: back})
	r = p.After(plan, decision.Result{OptionIDs: d.OptionIDs(), Probabilities: []float64{0.55, 0.4, 0.05}}, nil)
	fmt.Println(r.Outcome.Status, r.Outcome.Step, "-", r.Outcome.Reason)
	// Output:
	// escalate gpu - model chose billing; p_max 0.55 below 0.8, margin 0.15 below 0.2; escalating to gpu
	// decided billing - model chose billing with p=0.9, margin 0.82
	// decided billing - model chose billing with p=0.55, margin 0.15
	// review escalate - model chose billing; p_max 0.55 below 0.8, margin 0.15 below 0.2; cannot escalate to gpu, already visited; routed to review
}
