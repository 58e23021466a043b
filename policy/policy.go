package policy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/decision"
)

// Steps recorded in decision.Outcome.Step.
const (
	StepAuthorization = "authorization" // the caller may not receive the decision
	StepKind          = "kind"          // the decision does not fit its kind
	StepRule          = "rule"          // a deterministic rule decided (or failed)
	StepModel         = "model"         // the model's choice passed every threshold
	StepThreshold     = "threshold"     // a threshold failed; the fallback applied
	StepOnError       = "on_error"      // scoring failed; on_error applied
	StepEscalate      = "escalate"      // too uncertain: escalated, or the fallback applied when it could not
)

// Policy is a validated, immutable policy: safe for concurrent use. Build
// one with Parse, Load or Default. A nil *Policy is not a permissive policy:
// its Before refuses every decision and its After yields StatusError, so a
// policy that failed to load cannot let decisions through by mistake.
type Policy struct {
	version     string
	kinds       map[string]*kind
	order       []*kind // file order, for match patterns
	def         *kind
	unknownKind string // "default" or "refuse"
	auth        *authorization
	costLimit   uint64
	temperature float64
}

// Caller says who asks for a decision.
type Caller struct {
	// Tenant is the caller's tenant (may be empty).
	Tenant string
	// APIKey is the key the caller presented (may be empty). It is compared
	// by its sha256 and never shown to rules.
	APIKey string
	// APIKeySHA256 is the hex sha256 of the key, for callers that carry
	// only its hash (a queue worker reading what the front door accepted).
	// Used when APIKey is empty.
	APIKeySHA256 string
	// Metadata is free caller data that rules read as `caller`.
	Metadata map[string]string
	// Stage is where in a cascade the decisions are evaluated: the pool
	// this runs on and the pools they already ran on. The zero Stage is
	// the first stage on an unnamed pool. Only the escalate clause reads
	// it; rules do not see it.
	Stage Stage
}

// Plan is what Before decided about a decision.
type Plan struct {
	// Decision is what to score: the caller's decision, with the options the
	// caller may not receive removed (authorization mode filter).
	Decision decision.Decision
	// Kind is the resolved policy kind.
	Kind string
	// Removed lists the option ids removed by authorization (filter mode).
	Removed []string
	// Outcome, when non-nil, settles the decision without the model (a rule
	// matched, or the caller was refused): do not score it.
	Outcome *decision.Outcome
	// Temperature is the temperature the policy asks for: the kind's own,
	// else the file's top-level one, 0 when it sets none. Before puts the
	// two in Decision.KindTemperature and Decision.PolicyTemperature: the
	// scorer applies one of them, the calibration file's or --temperature by
	// one precedence (tune.Resolve); After keeps the temperature the result
	// was scored at.
	Temperature float64
	// Debias is the kind's option-order rotations, 0 when it sets none
	// (also in Decision.KindDebias).
	Debias int
	// Stage is the caller's Stage, for After's escalate step.
	Stage Stage
}

// Default returns the permissive policy: one implicit kind "default" with no
// rules, no thresholds, no authorization and no temperature, so every
// decision is decided by the model's argmax. Use it explicitly when no
// policy file is configured; a nil *Policy refuses everything instead.
func Default() *Policy {
	return &Policy{
		version:     "default",
		kinds:       map[string]*kind{},
		def:         &kind{name: DefaultKind, fallback: action{kind: actAbstain}, onError: action{kind: actError}},
		unknownKind: "default",
		costLimit:   DefaultRuleCostLimit,
	}
}

// Version identifies the policy: the hex sha256 of the file it was parsed
// from, or "default" for Default(). A nil policy has version "none".
func (p *Policy) Version() string {
	if p == nil {
		return "none"
	}
	return p.version
}

// Kinds lists the kind names the policy knows, including the default kind,
// sorted.
func (p *Policy) Kinds() []string {
	if p == nil {
		return nil
	}
	return p.kindNames()
}

func (p *Policy) outcome(status decision.Status, step, reason string) *decision.Outcome {
	return &decision.Outcome{Status: status, Step: step, Reason: reason, Policy: p.Version()}
}

const nilPolicyReason = "no policy is loaded (nil *policy.Policy); use policy.Default() for the permissive policy"

// Before applies the steps that run before the model: kind resolution,
// authorization, then the kind's rules in order. When the returned plan's
// Outcome is non-nil the decision is settled and must not be scored;
// otherwise score plan.Decision and pass the result to After.
func (p *Policy) Before(d decision.Decision, c Caller) Plan {
	plan := Plan{Decision: d, Stage: c.Stage}
	if p == nil {
		plan.Outcome = &decision.Outcome{Status: decision.StatusRefused, Step: StepAuthorization, Reason: nilPolicyReason, Policy: p.Version()}
		return plan
	}
	k := p.resolve(&d)
	if k == nil {
		plan.Kind = d.Kind
		plan.Outcome = p.outcome(decision.StatusRefused, StepKind, fmt.Sprintf("kind %q is not configured and unknown_kind is refuse", d.Kind))
		return plan
	}
	plan.Kind, plan.Debias = k.name, k.debias
	plan.Temperature = k.temperature
	if plan.Temperature == 0 {
		plan.Temperature = p.temperature
	}
	plan.Decision.KindTemperature, plan.Decision.PolicyTemperature, plan.Decision.KindDebias = k.temperature, p.temperature, k.debias
	if k.declared != nil {
		var undeclared []string
		for _, o := range d.Options {
			if !k.declared[o.ID] {
				undeclared = append(undeclared, o.ID)
			}
		}
		if len(undeclared) > 0 {
			plan.Outcome = p.outcome(decision.StatusRefused, StepKind, fmt.Sprintf("option %s not declared by kind %q", quoteList(undeclared), k.name))
			return plan
		}
	}
	if o := p.authorize(&plan, k, c); o != nil {
		plan.Outcome = o
		return plan
	}
	if len(k.rules) > 0 {
		act := activation(&plan.Decision, k.name, c)
		for _, r := range k.rules {
			hit, err := r.eval(act)
			if err != nil {
				plan.Outcome = p.act(k.onError, &plan.Decision, StepRule, fmt.Sprintf("rule %q failed: %s", r.name, oneLine(err.Error())))
				plan.Outcome.Rule = r.name
				break
			}
			if !hit {
				continue
			}
			if !hasOption(&plan.Decision, r.option) {
				plan.Outcome = p.outcome(decision.StatusAbstained, StepRule, fmt.Sprintf("rule %q matched but its option %q is not among the decision's allowed options", r.name, r.option))
			} else {
				plan.Outcome = p.outcome(decision.StatusRule, StepRule, fmt.Sprintf("rule %q matched: %s", r.name, r.option))
				plan.Outcome.Chosen = r.option
			}
			plan.Outcome.Rule = r.name
			break
		}
	}
	if plan.Outcome != nil {
		plan.Outcome.Removed = plan.Removed
	}
	return plan
}

// resolve finds the kind of a decision: its kind field, else the first kind
// whose match patterns fit its id and question, else the default kind. It
// returns nil when the named kind is unknown and unknown_kind is refuse.
func (p *Policy) resolve(d *decision.Decision) *kind {
	if d.Kind != "" {
		if k := p.kinds[d.Kind]; k != nil {
			return k
		}
		if d.Kind == p.def.name {
			return p.def
		}
		if p.unknownKind == "refuse" {
			return nil
		}
		return p.def
	}
	for _, k := range p.order {
		for _, m := range k.match {
			if m.matches(d.ID, d.Question) {
				return k
			}
		}
	}
	return p.def
}

// kindByName finds a kind for After.
func (p *Policy) kindByName(name string) *kind {
	if k := p.kinds[name]; k != nil {
		return k
	}
	if name == p.def.name {
		return p.def
	}
	return nil
}

// authorize applies the authorization section to the plan. It returns a
// refusal, or nil with plan.Decision filtered as the caller's grant says.
func (p *Policy) authorize(plan *Plan, k *kind, c Caller) *decision.Outcome {
	if p.auth == nil {
		return nil
	}
	g := p.auth.match(c)
	if g == nil {
		return p.outcome(decision.StatusRefused, StepAuthorization, fmt.Sprintf("caller (tenant %q) is not listed and unlisted callers are refused", c.Tenant))
	}
	if g.kinds != nil && !g.kinds[k.name] {
		return p.outcome(decision.StatusRefused, StepAuthorization, fmt.Sprintf("caller %s may not receive decisions of kind %q", g.name, k.name))
	}
	if g.options == nil {
		return nil
	}
	var kept []decision.Option
	var removed []string
	for _, o := range plan.Decision.Options {
		if g.options[o.ID] {
			kept = append(kept, o)
		} else {
			removed = append(removed, o.ID)
		}
	}
	if len(removed) == 0 {
		return nil
	}
	if g.refuse {
		return p.outcome(decision.StatusRefused, StepAuthorization, fmt.Sprintf("caller %s may not receive option %s", g.name, quoteList(removed)))
	}
	plan.Decision.Options = kept
	plan.Removed = removed
	if len(kept) < 2 {
		o := p.outcome(decision.StatusRefused, StepAuthorization, fmt.Sprintf("caller %s may receive %d of the decision's options after removing %s; at least 2 are needed", g.name, len(kept), quoteList(removed)))
		o.Removed = removed
		return o
	}
	return nil
}

// match picks the grant for a caller: an entry matching both tenant and API
// key beats one matching the key only, which beats one matching the tenant
// only; the first in file order wins a tie. Unlisted callers get the
// unlisted grant (nil: refused).
func (a *authorization) match(c Caller) *grant {
	var best *grant
	bestScore := 0
	var sum [sha256.Size]byte
	haveKey := false
	if c.APIKey != "" {
		sum, haveKey = sha256.Sum256([]byte(c.APIKey)), true
	} else if h, err := hex.DecodeString(c.APIKeySHA256); err == nil && len(h) == sha256.Size {
		copy(sum[:], h)
		haveKey = true
	}
	for _, g := range a.callers {
		score := 0
		if g.hasTenant {
			if g.tenant != c.Tenant {
				continue
			}
			score++
		}
		if g.keyHash != nil {
			if !haveKey || subtle.ConstantTimeCompare(g.keyHash, sum[:]) != 1 {
				continue
			}
			score += 2
		}
		if score > bestScore {
			best, bestScore = g, score
		}
	}
	if best == nil {
		return a.unlisted
	}
	return best
}

// act turns a fallback or on_error action into an outcome. A named option
// that the decision does not carry yields StatusAbstained: the policy never
// returns an option the caller was not offered.
func (p *Policy) act(a action, d *decision.Decision, step, reason string) *decision.Outcome {
	switch a.kind {
	case actReview:
		return p.outcome(decision.StatusReview, step, reason+"; routed to review")
	case actAbstain:
		return p.outcome(decision.StatusAbstained, step, reason+"; abstained")
	case actOption:
		if !hasOption(d, a.option) {
			return p.outcome(decision.StatusAbstained, step, fmt.Sprintf("%s; fallback option %q is not among the decision's allowed options, abstained", reason, a.option))
		}
		o := p.outcome(decision.StatusFallback, step, reason+"; fallback "+a.option)
		o.Chosen = a.option
		return o
	default:
		return p.outcome(decision.StatusError, step, reason)
	}
}

// After applies the steps that follow the model: thresholds, the kind's
// escalate clause, and fallback or on_error. It sets r.Outcome and returns
// r.
//
// With an escalate clause, a result whose top probability or margin is
// below its bounds gets StatusEscalate with Outcome.Escalate set to the
// target pool, whether or not it passed the thresholds; when the target is
// plan.Stage's pool or one it visited, the kind's fallback applies instead
// (step escalate). Rule outcomes and scoring failures never escalate.
//
// The temperature is the scorer's (r.Temperature; 1 when unset): the
// kind's temperature reached the scorer through plan.Decision and was
// applied there, once, by the same precedence for every entry point.
// r.Probabilities, r.Confidence and r.Margin are recomputed from
// r.OptionLogits at r.Temperature (r.Probabilities are checked and kept
// when the logits are missing). r.Chosen is set to the outcome's option: empty
// unless the outcome names one, so a client that reads only Chosen never
// acts on an abstained, refused or failed decision. A scoring failure
// (scoreErr or r.Error), a result that does not fit the plan, or a plan the
// policy does not know never yields StatusDecided.
func (p *Policy) After(plan Plan, r decision.Result, scoreErr error) decision.Result {
	d := &plan.Decision
	if r.ID == "" {
		r.ID = d.ID
	}
	if r.Kind == "" {
		r.Kind = d.Kind
	}
	if p == nil {
		return failed(r, &decision.Outcome{Status: decision.StatusError, Step: StepOnError, Reason: nilPolicyReason, Policy: p.Version()})
	}
	if plan.Outcome != nil {
		if r.OptionIDs == nil {
			r.OptionIDs = d.OptionIDs() // every entry point answers a settled decision with its options
		}
		o := *plan.Outcome
		o.Checks = append([]decision.Check(nil), o.Checks...)
		if o.Status == decision.StatusDecided || o.Status == decision.StatusEscalate || o.Escalate != "" || (o.Chosen != "" && !hasOption(d, o.Chosen)) {
			// Before never does this; a hand-made plan must not smuggle an answer.
			return failed(r, p.outcome(decision.StatusError, StepOnError, "plan outcome is not one Before can produce"))
		}
		r.Outcome = &o
		r.Chosen = o.Chosen
		return r
	}
	k := p.kindByName(plan.Kind)
	if k == nil {
		return failed(r, p.outcome(decision.StatusError, StepOnError, fmt.Sprintf("plan kind %q is not in policy %s; make plans with Before of the same policy", plan.Kind, short(p.version))))
	}
	ids := d.OptionIDs()
	if r.OptionIDs == nil {
		r.OptionIDs = ids
	}
	finish := func(o *decision.Outcome) decision.Result {
		o.Removed = plan.Removed
		r.Outcome = o
		r.Chosen = o.Chosen
		return r
	}
	if scoreErr != nil || r.Error != nil {
		if r.Error == nil {
			r.Error = &decision.Error{Code: "engine", Message: scoreErr.Error()}
		}
		r.Confidence, r.Margin = 0, 0
		return finish(p.act(k.onError, d, StepOnError, "scoring failed: "+oneLine(r.Error.Error())))
	}
	bad := func(format string, args ...any) decision.Result {
		r.Confidence, r.Margin = 0, 0
		return finish(p.act(k.onError, d, StepOnError, fmt.Sprintf(format, args...)))
	}
	if !equalStrings(r.OptionIDs, ids) {
		return bad("result options %s do not match the planned options %s", quoteList(r.OptionIDs), quoteList(ids))
	}
	if len(ids) == 0 {
		return bad("the decision has no options")
	}
	temp := r.Temperature
	if !(temp > 0) || math.IsInf(temp, 0) {
		temp = 1
	}
	probs, err := probabilities(r.OptionLogits, r.Probabilities, len(ids), temp)
	if err != nil {
		return bad("unusable scores: %v", err)
	}
	r.Probabilities, r.Temperature = probs, temp
	best, second := 0, -1
	for i := 1; i < len(probs); i++ {
		switch {
		case probs[i] > probs[best]:
			best, second = i, best
		case second < 0 || probs[i] > probs[second]:
			second = i
		}
	}
	r.Confidence = decision.Confidence(probs)
	r.Margin = probs[best]
	if second >= 0 {
		r.Margin -= probs[second]
	}
	top := ids[best]
	var checks []decision.Check
	var failedChecks []string
	check := func(name string, value, threshold float64) {
		c := decision.Check{Name: name, Value: value, Threshold: threshold, Passed: value >= threshold}
		checks = append(checks, c)
		if !c.Passed {
			failedChecks = append(failedChecks, fmt.Sprintf("%s %s < %s", name, num(value), num(threshold)))
		}
	}
	if k.hasMinProb {
		check("min_probability", probs[best], k.minProb)
	}
	if k.hasMinMarg {
		check("min_margin", r.Margin, k.minMargin)
	}
	if m, ok := k.optionMin[top]; ok {
		check("option_min:"+top, probs[best], m)
	}
	// The escalate step comes after the thresholds: an uncertain result
	// goes on to a bigger model even when it passed them here.
	var o *decision.Outcome
	switch esc := p.escalate(k, plan.Stage, d, top, probs[best], r.Margin, &checks); {
	case esc != nil:
		o = esc
	case len(failedChecks) == 0:
		o = p.outcome(decision.StatusDecided, StepModel, fmt.Sprintf("model chose %s with p=%s, margin %s", top, num(probs[best]), num(r.Margin)))
		if len(checks) > 0 {
			o.Reason += "; thresholds passed"
		}
		o.Chosen = top
	default:
		o = p.act(k.fallback, d, StepThreshold, fmt.Sprintf("model chose %s with p=%s but %s", top, num(probs[best]), strings.Join(failedChecks, ", ")))
	}
	o.Checks = checks
	return finish(o)
}

// failed settles r with an error outcome and no option.
func failed(r decision.Result, o *decision.Outcome) decision.Result {
	r.Outcome = o
	r.Chosen = ""
	r.Confidence, r.Margin = 0, 0
	return r
}

// probabilities computes softmax(logits/T). Without logits it uses the
// given probabilities: softmax(log p / T) equals the tempered softmax of
// any logits that produced p.
func probabilities(logits, probs []float64, n int, temp float64) ([]float64, error) {
	var xs []float64
	switch {
	case len(logits) == n:
		for i, x := range logits {
			if math.IsNaN(x) || math.IsInf(x, 1) {
				return nil, fmt.Errorf("option_logits[%d] is %v", i, x)
			}
		}
		xs = logits
	case len(logits) == 0 && len(probs) == n:
		sum := 0.0
		xs = make([]float64, n)
		for i, q := range probs {
			if math.IsNaN(q) || q < 0 || q > 1 {
				return nil, fmt.Errorf("probabilities[%d] is %v", i, q)
			}
			sum += q
			xs[i] = math.Log(q)
		}
		if math.Abs(sum-1) > 1e-6 {
			return nil, fmt.Errorf("probabilities sum to %v", sum)
		}
		// Already at the scorer's temperature: keep them.
		return append([]float64(nil), probs...), nil
	default:
		return nil, fmt.Errorf("%d option_logits and %d probabilities for %d options", len(logits), len(probs), n)
	}
	maxv := math.Inf(-1)
	for _, x := range xs {
		maxv = math.Max(maxv, x/temp)
	}
	switch {
	case math.IsInf(maxv, -1):
		return nil, fmt.Errorf("every option has zero probability")
	case math.IsInf(maxv, 1):
		return nil, fmt.Errorf("scores overflow at temperature %v", temp)
	}
	out := make([]float64, n)
	sum := 0.0
	for i, x := range xs {
		out[i] = math.Exp(x/temp - maxv)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out, nil
}

func hasOption(d *decision.Decision, id string) bool {
	for _, o := range d.Options {
		if o.ID == id {
			return true
		}
	}
	return false
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func quoteList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
	}
	return strings.Join(q, ", ")
}

// num formats a probability for reasons: four significant digits.
func num(f float64) string { return strconv.FormatFloat(f, 'g', 4, 64) }

func short(v string) string {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}
