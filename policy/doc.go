// Package policy turns a model's option probabilities into an outcome that
// software may act on. The model proposes; the policy decides. Business
// rules and authorization never live in the model.
//
// A policy is a YAML file (see docs/policy.md and examples/policy.yaml).
// Parse and Load validate all of it up front and report every problem with
// its path, for example
//
//	kinds.support-route.rules[2].option: unknown option "refund" (line 14)
//
// so a policy is either fully valid or not loaded at all.
//
// # Data flow
//
// Every entry point (serve, the queue worker, score, batch, eval) runs one
// flow, Apply, around the engine:
//
//	rs, err := p.Apply(ctx, caller, ds, scorer.Score)
//
// It is three steps, which a caller that merges the decisions of several
// requests into one engine call (the worker) runs itself:
//
//	f := p.Start(ds, caller)         // Before: kind, authorization, rules
//	scored, err := score(f.Pending()) // only what nothing settled, in order
//	rs, err := f.Finish(scored, err) // After: thresholds, fallback, on_error
//
// A whole-call scoring error comes back from Finish (each scored decision
// also gets on_error); what it means is the caller's: serve answers 503,
// the worker releases the message, the offline commands stop.
//
// Before resolves the decision's kind (its kind field, else the first kind
// whose match patterns fit its id or question, else the default kind),
// applies authorization (the caller's tenant or API key decides which kinds
// and options it may receive; disallowed options are removed before scoring
// in mode filter, or the decision is refused in mode refuse), then runs the
// kind's CEL rules in order: the first that is true decides with its named
// option, without the model.
//
// After recomputes the probabilities from the option logits at the
// temperature the scorer applied (package tune chose it; see
// tune.Resolve), checks min_probability, min_margin and the chosen option's
// minimum, and settles the decision as decided, or applies the kind's
// fallback (a named option, abstain or review). When scoring failed for good
// it applies on_error. The outcome (decision.Outcome) records the status,
// the step that decided, every comparison made and a one-line reason.
//
// # Cascades
//
// A kind's escalate clause sends results the model is unsure of (top
// probability or margin below its bounds) on to a bigger model on another
// pool: After, once the thresholds are checked, gives them
// decision.StatusEscalate with the pool in Outcome.Escalate, and the
// caller sends the decision on to that pool's queue. The caller says where
// it runs in Caller.Stage (the pool, and the pools the decision already
// ran on; the zero Stage is a first stage on an unnamed pool) and passes
// Stage.Next to the next one. The policy never escalates to the current
// pool or a visited one: such a result gets the kind's fallback, so a
// decision runs on each pool at most once. Rule outcomes and scoring
// failures never escalate.
//
// # Failing closed
//
// No error path yields decision.StatusDecided or decision.StatusEscalate:
// scoring errors, results that do not match the plan, NaN scores, rules
// that fail to evaluate, a plan from another policy and a nil *Policy all
// end in error, abstained, review or a configured fallback. An option the caller may not receive is never
// returned: the model only sees allowed options, and a rule or fallback
// that names an option the decision does not carry abstains instead.
// Result.Chosen always equals Outcome.Chosen, so it is empty when there is
// nothing to act on.
//
// Use Default for the permissive policy (no rules, no thresholds, argmax
// decides) when no file is configured; a nil *Policy refuses everything.
//
// # Reloading
//
// A Holder keeps the current policy behind an atomic pointer. Reload (or a
// SIGHUP with WatchSIGHUP) parses the file again and swaps it in only when
// it is valid; a bad file leaves the previous policy in force and returns
// the error. Use one Current() value for both Before and After of a
// decision.
package policy
