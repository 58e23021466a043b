package decision

// Status is what the policy made of a decision.
type Status string

// Outcome statuses. Only StatusDecided and StatusRule carry a model- or
// rule-chosen option that software may act on without a human; fallback
// may name an option the policy configured. StatusEscalate settles
// nothing yet: the decision goes on to a bigger model on another pool.
const (
	StatusDecided   Status = "decided"   // the model's choice passed every threshold
	StatusRule      Status = "rule"      // a deterministic rule decided before the model
	StatusFallback  Status = "fallback"  // a threshold failed; the configured option was returned
	StatusAbstained Status = "abstained" // a threshold failed; no option is returned
	StatusReview    Status = "review"    // routed to a human queue
	StatusRefused   Status = "refused"   // the caller may not receive this decision
	StatusError     Status = "error"     // scoring failed for good
	StatusEscalate  Status = "escalate"  // too uncertain for this stage; score it again on Outcome.Escalate's pool
)

// Outcome records how a decision was settled and why.
type Outcome struct {
	// Status is the kind of settlement.
	Status Status `json:"status"`
	// Chosen is the option to act on; empty for abstained, review, refused,
	// error and escalate (unless a fallback option was configured).
	Chosen string `json:"chosen,omitempty"`
	// Step names the policy step that ended evaluation: "kind",
	// "authorization", "rule", "model", "threshold", "escalate", "on_error".
	Step string `json:"step"`
	// Rule is the name of the rule that matched, for StatusRule.
	Rule string `json:"rule,omitempty"`
	// Reason is a one-line human explanation, with the numbers.
	Reason string `json:"reason"`
	// Checks lists each comparison the policy made.
	Checks []Check `json:"checks,omitempty"`
	// Removed lists options the caller was not allowed and that were
	// removed before scoring (authorization mode "filter").
	Removed []string `json:"removed_options,omitempty"`
	// Policy identifies the policy version that decided (e.g. its sha256).
	Policy string `json:"policy,omitempty"`
	// Escalate is the pool (RouteCPU or RouteGPU) the decision is sent on
	// to, for StatusEscalate only; empty otherwise.
	Escalate Route `json:"escalate,omitempty"`
}

// Check is one threshold comparison made by the policy.
type Check struct {
	Name      string  `json:"name"`      // e.g. "min_probability", "min_margin", "option_min:billing"
	Value     float64 `json:"value"`     // the measured value
	Threshold float64 `json:"threshold"` // the configured bound
	Passed    bool    `json:"passed"`
}
