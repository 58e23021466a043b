package decision

import "fmt"

// CascadeStage is one pool's answer to a decision that went through a
// cascade: a kind's escalate clause sent it from a smaller model on to a
// bigger one on another pool. A result that was scored on more than one
// pool lists every stage in Result.Cascade, oldest first; the last one
// decided (Decided), and the result's own probabilities and outcome are
// that stage's.
type CascadeStage struct {
	// Pool is the pool that scored this stage (RouteCPU or RouteGPU).
	Pool Route `json:"pool"`
	// Model is the model that answered on that pool.
	Model *ModelIdentity `json:"model,omitempty"`
	// Probabilities are that model's, one per Result.OptionIDs entry.
	Probabilities []float64 `json:"probabilities,omitempty"`
	// OptionLogits, Temperature, Calibrated, CalibrationSHA256 and
	// PromptVersion are that stage's, as in Result: what calibrating the
	// stage's model from labeled results needs (verdict feedback export
	// --model).
	OptionLogits      []float64 `json:"option_logits,omitempty"`
	Temperature       float64   `json:"temperature,omitempty"`
	Calibrated        bool      `json:"calibrated,omitempty"`
	CalibrationSHA256 string    `json:"calibration_sha256,omitempty"`
	PromptVersion     string    `json:"prompt_version,omitempty"`
	// Chosen is the option that model ranked first (also on a stage that
	// escalated, whose outcome named no option).
	Chosen string `json:"chosen,omitempty"`
	// Confidence and Margin are those of Probabilities.
	Confidence float64 `json:"confidence"`
	Margin     float64 `json:"margin"`
	// Status is the policy's outcome on this stage: StatusEscalate for a
	// stage that sent the decision on, the final status for the last.
	Status Status `json:"status"`
	// Reason is the policy's reason for Status.
	Reason string `json:"reason,omitempty"`
	// Decided marks the stage whose answer the result carries (the last).
	Decided bool `json:"decided,omitempty"`
	// Timing is the stage's timing, when the worker publishes timing.
	Timing *Timing `json:"timing_ms,omitempty"`
	// Error is set when this stage could not score the decision.
	Error *Error `json:"error,omitempty"`
}

// StageOf is r's entry in a cascade, scored on pool. decided marks the
// stage that settles the decision.
func StageOf(pool Route, r *Result, decided bool) CascadeStage {
	s := CascadeStage{
		Pool: pool, Model: r.Model, Probabilities: r.Probabilities, OptionLogits: r.OptionLogits,
		Temperature: r.Temperature, Calibrated: r.Calibrated, CalibrationSHA256: r.CalibrationSHA256, PromptVersion: r.PromptVersion,
		Confidence: r.Confidence, Margin: r.Margin, Decided: decided, Timing: r.Timing, Error: r.Error,
	}
	if best := argmax(r.Probabilities); best >= 0 && best < len(r.OptionIDs) {
		s.Chosen = r.OptionIDs[best]
	}
	if r.Outcome != nil {
		s.Status, s.Reason = r.Outcome.Status, r.Outcome.Reason
	} else if r.Error != nil {
		s.Status = StatusError
	}
	return s
}

func argmax(p []float64) int {
	best := -1
	for i, v := range p {
		if best < 0 || v > p[best] {
			best = i
		}
	}
	return best
}

// CheckCascade validates the stages a message carries for its decisions
// (one list per decision, or none): every list names the same pools in
// the same order, each pool once, each stage an escalation, and the
// message's own pool is not among them. path names the field in errors.
func CheckCascade(stages [][]CascadeStage, decisions int, current Route, path string) error {
	if len(stages) == 0 {
		return nil
	}
	if len(stages) != decisions {
		return fmt.Errorf("%s: has %d entries for %d decisions", path, len(stages), decisions)
	}
	var pools []Route
	for i, list := range stages {
		p := fmt.Sprintf("%s[%d]", path, i)
		if len(list) == 0 {
			return fmt.Errorf("%s: is empty", p)
		}
		if i > 0 && len(list) != len(pools) {
			return fmt.Errorf("%s: has %d stages, %s[0] has %d", p, len(list), path, len(pools))
		}
		seen := map[Route]bool{}
		for k, s := range list {
			sp := fmt.Sprintf("%s[%d]", p, k)
			switch {
			case !s.Pool.IsPool():
				return fmt.Errorf("%s.pool: %q is not a pool (want cpu or gpu)", sp, s.Pool)
			case seen[s.Pool]:
				return fmt.Errorf("%s.pool: %s is named twice in one cascade", sp, s.Pool)
			case s.Pool == current:
				return fmt.Errorf("%s.pool: %s is the pool this message is on", sp, s.Pool)
			case s.Status != StatusEscalate:
				return fmt.Errorf("%s.status: a stage that sent a decision on has status %q, got %q", sp, StatusEscalate, s.Status)
			case i > 0 && s.Pool != pools[k]:
				return fmt.Errorf("%s.pool: %s, but %s[0] has %s there", sp, s.Pool, path, pools[k])
			}
			seen[s.Pool] = true
			if i == 0 {
				pools = append(pools, s.Pool)
			}
		}
	}
	return nil
}

// AsResult is the stage's answer as a result of its own, for the decision
// whose result r carries the stage: r's id, kind and options with the
// stage's model, scores and outcome status. It is what the stage's model
// answered, for evaluating or calibrating that model alone.
func (s *CascadeStage) AsResult(r *Result) Result {
	out := Result{
		ID: r.ID, Kind: r.Kind, OptionIDs: r.OptionIDs, Probabilities: s.Probabilities, OptionLogits: s.OptionLogits,
		Chosen: s.Chosen, Confidence: s.Confidence, Margin: s.Margin, Temperature: s.Temperature,
		Calibrated: s.Calibrated, CalibrationSHA256: s.CalibrationSHA256, PromptVersion: s.PromptVersion,
		Model: s.Model, Timing: s.Timing, Error: s.Error, Line: r.Line,
	}
	if s.Status != "" {
		out.Outcome = &Outcome{Status: s.Status, Reason: s.Reason}
	}
	return out
}

// ByModel returns what the model named by model answered for r: r itself
// when r's model is it, else the cascade stage scored by it. model is a
// sha256 (or a prefix of one, at least 8 hex digits) or a model file name.
func (r *Result) ByModel(model string) (Result, bool) {
	if r.Model.Is(model) {
		return *r, true
	}
	for i := range r.Cascade {
		if r.Cascade[i].Model.Is(model) {
			return r.Cascade[i].AsResult(r), true
		}
	}
	return Result{}, false
}
