package server

import "github.com/verdict-dev/verdict/decision"

// Caller is who sent a request, as authentication established it.
type Caller struct {
	// Tenant is the tenant of the API key used ("" without keys).
	Tenant string
	// APIKey is the key the caller presented ("" without keys).
	APIKey string
}

// Policy is what the server needs of a policy: a plan for each decision
// before scoring. It is declared here, by its consumer; the command wires
// the policy package to it with a small adapter.
type Policy interface {
	// Plan is called once per decision of a request, before scoring.
	Plan(d decision.Decision, c Caller) Plan
}

// Plan is a policy's plan for one decision.
type Plan struct {
	// Decision is what to score: the request's decision, possibly with
	// options the caller may not receive removed.
	Decision decision.Decision
	// Settled, when non-nil, settles the decision without the model (a
	// rule matched, or the caller was refused): it is not scored.
	Settled *decision.Outcome
	// FinishFunc turns the scored result (or the scoring error) into the
	// final result with its Outcome. For a settled decision it receives an
	// unscored result (id, kind and option ids only). Nil keeps the scored
	// result as is, and gives a settled decision a result carrying Settled.
	FinishFunc func(r decision.Result, scoreErr error) decision.Result
}
