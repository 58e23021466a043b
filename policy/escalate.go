package policy

import (
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/verdict-dev/verdict/decision"
)

// Stage says where in a cascade the policy evaluates a decision: a small
// model scores first, and a kind's escalate clause sends uncertain results
// on to a bigger model on another pool. A caller escalates only to the
// pools it names in Pools (a queue worker with those pools' queues); the
// zero Stage names none, so callers that cannot send a decision on
// (verdict serve, score, batch, eval) apply the kind's fallback instead.
//
// A decision runs on each pool at most once: the policy never escalates to
// the current pool or to a visited one, so a chain has at most as many
// stages as there are pools. A worker that can receive escalated decisions
// must set Pool, or its own pool looks unvisited.
type Stage struct {
	// Pool is the pool this evaluation runs on (decision.RouteCPU or
	// decision.RouteGPU); decision.RouteAuto when unknown.
	Pool decision.Route
	// Visited lists the pools the decision was scored on before this stage,
	// oldest first.
	Visited []decision.Route
	// Pools are the pools this caller can send a decision on to; an
	// escalation to any other gets the kind's fallback.
	Pools []decision.Route
}

// Next is the stage of a decision escalated from s to pool to: s's pool
// joins the visited ones. A worker that sends a decision on to
// Outcome.Escalate passes Next(Outcome.Escalate) with it.
func (s Stage) Next(to decision.Route) Stage {
	visited := append([]decision.Route(nil), s.Visited...)
	if s.Pool != decision.RouteAuto && !s.visited(s.Pool) {
		visited = append(visited, s.Pool)
	}
	return Stage{Pool: to, Visited: visited, Pools: s.Pools}
}

func (s Stage) reaches(r decision.Route) bool {
	for _, p := range s.Pools {
		if p == r {
			return true
		}
	}
	return false
}

func (s Stage) visited(r decision.Route) bool {
	for _, v := range s.Visited {
		if v == r {
			return true
		}
	}
	return false
}

// escalation is a kind's compiled escalate clause: a result whose top
// probability is below below, or whose margin is below marginBelow, goes
// on to pool to.
type escalation struct {
	below          float64
	hasBelow       bool
	marginBelow    float64
	hasMarginBelow bool
	to             decision.Route
	line           int // of the "to" field
}

var escalateFields = []string{"below", "margin_below", "to"}

// escalation reads a kind's escalate clause: {below, margin_below, to},
// at least one bound, both in (0, 1], and a pool. Whether the pool differs
// from the current one is known only when a result is applied (After).
func (w *walker) escalation(n *yaml.Node, path string) *escalation {
	fields, ok := w.mapping(n, path, escalateFields)
	if !ok {
		return nil
	}
	e := &escalation{}
	good, hasBound, hasTo := true, false, false
	for _, f := range fields {
		switch f.key {
		case "below":
			hasBound = true
			e.below, e.hasBelow = w.number(f.val, f.path, 0, 1, true)
			good = good && e.hasBelow
		case "margin_below":
			hasBound = true
			e.marginBelow, e.hasMarginBelow = w.number(f.val, f.path, 0, 1, true)
			good = good && e.hasMarginBelow
		case "to":
			hasTo = true
			s, ok := w.str(f.val, f.path)
			if !ok {
				good = false
				continue
			}
			if r := decision.Route(s); r.IsPool() {
				e.to, e.line = r, f.val.Line
			} else {
				w.add(f.val, f.path, "unknown pool %q (want %s or %s)", s, decision.RouteCPU, decision.RouteGPU)
				good = false
			}
		}
	}
	if !hasBound {
		w.add(n, path, `must set "below" or "margin_below"`)
		good = false
	}
	if !hasTo {
		w.add(n, pathJoin(path, "to"), "is required")
		good = false
	}
	if !good {
		return nil
	}
	return e
}

// escalate applies a kind's escalate clause to a scored result, after the
// thresholds: it adds its comparisons to checks and returns nil when the
// kind has no clause, the result is certain enough (top probability prob
// and margin at or above the bounds) or the stage is on the clause's pool
// already (the big model of the cascade has answered: the thresholds
// decide). An uncertain result escalates to the clause's pool, or, when
// that pool was visited or the caller has no queue for it, gets the kind's
// fallback.
func (p *Policy) escalate(k *kind, s Stage, d *decision.Decision, top string, prob, margin float64, checks *[]decision.Check) *decision.Outcome {
	e := k.escalate
	if e == nil || e.to == s.Pool {
		// No clause, or already on the pool the clause asks for (the last
		// stage of the cascade): the thresholds alone decide.
		return nil
	}
	var why []string
	check := func(name, label string, value, bound float64) {
		c := decision.Check{Name: name, Value: value, Threshold: bound, Passed: value >= bound}
		*checks = append(*checks, c)
		if !c.Passed {
			why = append(why, fmt.Sprintf("%s %s below %s", label, num(value), num(bound)))
		}
	}
	if e.hasBelow {
		check("escalate.below", "p_max", prob, e.below)
	}
	if e.hasMarginBelow {
		check("escalate.margin_below", "margin", margin, e.marginBelow)
	}
	if len(why) == 0 {
		return nil
	}
	reason := fmt.Sprintf("model chose %s; %s", top, strings.Join(why, ", "))
	switch {
	case s.visited(e.to):
		return p.act(k.fallback, d, StepEscalate, fmt.Sprintf("%s; cannot escalate to %s, already visited", reason, e.to))
	case !s.reaches(e.to):
		return p.act(k.fallback, d, StepEscalate, fmt.Sprintf("%s; cannot escalate to %s from here (no queue for it)", reason, e.to))
	}
	o := p.outcome(decision.StatusEscalate, StepEscalate, fmt.Sprintf("%s; escalating to %s", reason, e.to))
	o.Escalate = e.to
	return o
}

// EscalationPools lists the pools the policy's kinds escalate to, sorted
// and without repeats; empty when no kind escalates. A runtime that sends
// escalated decisions on needs a queue for each.
func (p *Policy) EscalationPools() []decision.Route {
	if p == nil {
		return nil
	}
	seen := map[decision.Route]bool{}
	var out []decision.Route
	for _, k := range append([]*kind{p.def}, p.order...) {
		if k != nil && k.escalate != nil && !seen[k.escalate.to] {
			seen[k.escalate.to] = true
			out = append(out, k.escalate.to)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// CheckPools checks the policy against the pools a runtime can reach (its
// own and those it has queues for): every kind's escalate clause must name
// one of them. whole says the pools are the whole deployment (verdict up):
// then a deployment of one pool cannot escalate at all, its only pool
// would escalate to itself. The error is a *LoadError (it matches
// ErrInvalid) naming each clause's path.
func (p *Policy) CheckPools(pools []decision.Route, whole bool) error {
	if p == nil {
		return nil
	}
	have := map[decision.Route]bool{}
	names := make([]string, len(pools))
	for i, r := range pools {
		have[r] = true
		names[i] = string(r)
	}
	var errs []FieldError
	kinds := p.order
	if p.def != nil && p.kinds[p.def.name] != p.def {
		kinds = append([]*kind{p.def}, kinds...)
	}
	for _, k := range kinds {
		if k.escalate == nil {
			continue
		}
		path := "kinds." + k.name + ".escalate.to"
		switch to := k.escalate.to; {
		case !have[to]:
			errs = append(errs, FieldError{Path: path, Line: k.escalate.line,
				Message: fmt.Sprintf("pool %s is not run here (pools: %s)", to, strings.Join(names, ","))})
		case whole && len(pools) == 1:
			errs = append(errs, FieldError{Path: path, Line: k.escalate.line,
				Message: fmt.Sprintf("%s is the only pool: a pool cannot escalate to itself", to)})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &LoadError{Errors: errs}
}
