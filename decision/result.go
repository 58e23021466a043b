package decision

import (
	"path"
	"strings"
)

// Result is what verdict returns for one decision. Arrays follow the order
// of the decision's options.
type Result struct {
	// ID echoes Decision.ID.
	ID string `json:"id"`
	// Kind echoes Decision.Kind when set.
	Kind string `json:"kind,omitempty"`
	// OptionIDs are the options in request order.
	OptionIDs []string `json:"option_ids,omitempty"`
	// Probabilities are a softmax over OptionLogits (after Temperature):
	// conditional on the declared options, not calibrated confidence.
	Probabilities []float64 `json:"probabilities,omitempty"`
	// OptionLogits are the raw model scores of each option's answer slot
	// (a label token's logit, or a label sequence's summed log-probability).
	OptionLogits []float64 `json:"option_logits,omitempty"`
	// Chosen is the option with the highest probability; when a policy
	// ran, it is the outcome's option instead (empty unless the outcome
	// names one, so a client reading only Chosen never acts on an
	// abstained, refused or failed decision).
	Chosen string `json:"chosen,omitempty"`
	// Confidence is clamp((N·p_max − 1)/(N − 1), 0, 1).
	Confidence float64 `json:"confidence"`
	// Margin is p_max minus the runner-up's probability.
	Margin float64 `json:"margin"`
	// Temperature that divided the logits before the softmax (1 = none).
	Temperature float64 `json:"temperature,omitempty"`
	// TemperatureSource says which setting chose Temperature:
	// "calibration" (a calibration file), "policy" (the policy kind),
	// "flag" (--temperature) or "default" (1).
	TemperatureSource string `json:"temperature_source,omitempty"`
	// Calibrated is true only when a fitted calibration was applied.
	Calibrated bool `json:"calibrated"`
	// CalibrationSHA256 is the sha256 of the calibration file applied.
	CalibrationSHA256 string `json:"calibration_sha256,omitempty"`
	// Debias reports option-order debiasing, when it ran.
	Debias *Debias `json:"debias,omitempty"`
	// PromptVersion names the prompt template that rendered the prompt.
	PromptVersion string `json:"prompt_version,omitempty"`
	// PromptSHA256 is the hex sha256 of the exact prompt text scored.
	PromptSHA256 string `json:"prompt_sha256,omitempty"`
	// Readout says what was read from the model.
	Readout string `json:"readout,omitempty"`
	// Labels are the answer-slot labels given to the options ("A", "B", …).
	Labels []string `json:"labels,omitempty"`
	// Tokens counts the prompt's tokens.
	Tokens *Tokens `json:"tokens,omitempty"`
	// Timing in milliseconds.
	Timing *Timing `json:"timing_ms,omitempty"`
	// Model identifies the model that answered.
	Model *ModelIdentity `json:"model,omitempty"`
	// Outcome is the policy's decision, when a policy ran.
	Outcome *Outcome `json:"outcome,omitempty"`
	// Error is set when the decision could not be scored.
	Error *Error `json:"error,omitempty"`
	// Cascade lists the stages of a decision scored on more than one pool
	// (a policy's escalate clause), oldest first; the last decided, and
	// the fields above are its answer. Empty for a one-stage decision.
	Cascade []CascadeStage `json:"cascade,omitempty"`
	// Line is the input line number, for results of JSONL files.
	Line int `json:"line,omitempty"`
}

// Debias describes an option-order debiased score: OptionLogits are then
// the mean over rotations of each option's log-probability.
type Debias struct {
	// Rotations is the number of cyclic option orders scored.
	Rotations int `json:"rotations"`
	// Agreement is the share of rotations whose own argmax is the combined
	// argmax (1 = the order never changed the answer).
	Agreement float64 `json:"agreement"`
}

// Tokens counts the tokens of one scored prompt.
type Tokens struct {
	// Input is the prompt's length in tokens.
	Input int `json:"input"`
	// StatePrefix is the number of leading tokens that depend only on the
	// state (and template), reusable across questions about it.
	StatePrefix int `json:"state_prefix"`
	// Evaluated is the number of tokens decoded for this decision (less than
	// Input when a cached prefix was reused).
	Evaluated int `json:"evaluated,omitempty"`
}

// Timing of one decision, in milliseconds.
type Timing struct {
	Tokenize float64 `json:"tokenize"`
	Queue    float64 `json:"queue,omitempty"`
	Decode   float64 `json:"decode"`
	Total    float64 `json:"total"`
}

// ModelIdentity pins the model that produced a result.
type ModelIdentity struct {
	File         string `json:"file"`
	SHA256       string `json:"sha256,omitempty"`
	Name         string `json:"name,omitempty"`
	Architecture string `json:"architecture,omitempty"`
	Quantization string `json:"quantization,omitempty"`
	ChatTemplate string `json:"chat_template,omitempty"`
	// LlamaCpp is the linked llama.cpp's version.
	LlamaCpp string `json:"llama_cpp,omitempty"`
	// Backend is the ggml device the model's layers run on: "CPU", or a
	// GPU such as "CUDA0" when layers were offloaded to it.
	Backend string `json:"backend,omitempty"`
	// Memory is "kv" for attention-only models, "hybrid" (attention plus
	// recurrent layers, e.g. qwen35) or "recurrent".
	Memory string `json:"memory,omitempty"`
}

// Error describes why a decision has no scores.
type Error struct {
	// Code is a stable machine-readable reason (see Code): "invalid",
	// "too_large", "malformed", "busy", "engine", "unsupported",
	// "canceled", "closed", "timeout", "unavailable", "calibration" (the
	// calibration file is pinned to another model or prompt).
	Code Code `json:"code"`
	// Message is for humans; for validation errors it lists field paths.
	Message string `json:"message"`
	// Fields lists validation problems by path.
	Fields []FieldError `json:"fields,omitempty"`
	// Retryable is true when the same request may succeed later.
	Retryable bool `json:"retryable"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// ErrorCode is e.Code, for CodeOf.
func (e *Error) ErrorCode() Code { return e.Code }

// Is reports whether m is the model named by name: a sha256, or a prefix
// of one of at least 8 hex digits, or the model's file name (with or
// without its directory).
func (m *ModelIdentity) Is(name string) bool {
	if m == nil || name == "" {
		return false
	}
	if len(name) >= 8 && len(name) <= len(m.SHA256) && strings.HasPrefix(m.SHA256, strings.ToLower(name)) {
		return true
	}
	return m.File == name || path.Base(m.File) == path.Base(name)
}
