package decision

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// System One question types.
const (
	TypeNoul   = "noul"
	TypeChoice = "choice"
	TypeScore  = "score"
)

// SystemOneRequest is a parsed POST /v1/systemone body: one state shared by
// several typed questions.
type SystemOneRequest struct {
	// Model is the alias or name the client asked for.
	Model string
	// State is shared by every question.
	State State
	// Questions in the order they appeared in the request.
	Questions []SystemOneQuestion
}

// SystemOneQuestion is one entry of the "questions" map.
type SystemOneQuestion struct {
	// Key is the caller's id for the question; never shown to the model.
	Key string
	// Type is noul, choice or score.
	Type string
	// Instructions is the question text (object or array instructions are
	// rendered as canonical JSON). Absent or null instructions (the SDK
	// helpers send null when none is given) become DefaultInstructions.
	Instructions string
	// NullLevels marks the score levels whose criterion was null; their
	// legend entry is written as null, as the request had it.
	NullLevels []bool
	// Options are derived from the type and criteria: noul → true, false;
	// choice → the criteria in order; score → "0".."n-1".
	Options []Option
}

// ParseSystemOne parses and validates a System One request. Unknown
// top-level fields and unknown fields inside a question are ignored, as the
// hosted services do, so that newer clients keep working; everything verdict
// reads is checked and reported with its path.
func ParseSystemOne(data []byte, l Limits) (*SystemOneRequest, error) {
	l = l.withDefaults()
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	var errs fieldErrs
	members, ok := objectMembers(data, "", &errs)
	if !ok {
		return nil, errs.err()
	}
	req := &SystemOneRequest{}
	var haveState, haveQuestions bool
	for _, m := range members {
		switch m.Key {
		case "model":
			if kindOf(m.Value) != "null" {
				req.Model, _ = stringField(m.Value, "model", &errs)
			}
		case "state":
			haveState = true
			req.State, _ = parseState(m.Value, "state", l.MaxStateBytes, &errs)
		case "questions":
			haveQuestions = true
			req.Questions = parseQuestions(m.Value, "questions", l, &errs)
		}
	}
	if !haveState {
		errs.add("state", "is required")
	}
	if !haveQuestions {
		errs.add("questions", "is required")
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return req, nil
}

// LooksLikeSystemOne reports whether a JSON body has the System One shape
// (a top-level "questions" object) rather than a SemIf one.
func LooksLikeSystemOne(data []byte) bool {
	if checkJSON(data) != nil {
		return false
	}
	var errs fieldErrs
	members, ok := objectMembers(data, "", &errs)
	if !ok {
		return false
	}
	for _, m := range members {
		if m.Key == "questions" {
			return kindOf(m.Value) == "object"
		}
	}
	return false
}

func parseQuestions(raw json.RawMessage, path string, l Limits, errs *fieldErrs) []SystemOneQuestion {
	members, ok := objectMembers(raw, path, errs)
	if !ok {
		return nil
	}
	switch {
	case len(members) == 0:
		errs.add(path, "must hold at least one question")
		return nil
	case len(members) > l.MaxDecisions:
		errs.add(path, "holds %d questions, limit is %d", len(members), l.MaxDecisions)
		return nil
	}
	out := make([]SystemOneQuestion, 0, len(members))
	for _, m := range members {
		p := join(path, m.Key)
		before := len(errs.list)
		checkID(m.Key, p, l.MaxIDBytes, errs)
		q := parseQuestion(m.Key, m.Value, p, l, errs)
		if len(errs.list) == before {
			out = append(out, q)
		}
	}
	return out
}

func parseQuestion(key string, raw json.RawMessage, path string, l Limits, errs *fieldErrs) SystemOneQuestion {
	q := SystemOneQuestion{Key: key}
	members, ok := objectMembers(raw, path, errs)
	if !ok {
		return q
	}
	var criteria json.RawMessage
	var haveInstr bool
	for _, m := range members {
		p := join(path, m.Key)
		switch m.Key {
		case "type":
			q.Type, _ = stringField(m.Value, p, errs)
		case "instructions":
			if kindOf(m.Value) == "null" {
				break
			}
			haveInstr = true
			q.Instructions = parseInstructions(m.Value, p, l, errs)
		case "criteria":
			if kindOf(m.Value) != "null" {
				criteria = m.Value
			}
		}
	}
	cp := join(path, "criteria")
	switch q.Type {
	case TypeNoul:
		q.Options = noulOptions(criteria, cp, l, errs)
	case TypeChoice:
		q.Options = choiceOptions(criteria, cp, l, errs)
	case TypeScore:
		q.Options, q.NullLevels = scoreOptions(criteria, cp, l, errs)
	case "":
		errs.add(join(path, "type"), "is required (noul, choice or score)")
	default:
		errs.add(join(path, "type"), "unknown type %q (want noul, choice or score)", q.Type)
	}
	if !haveInstr {
		q.Instructions = DefaultInstructions(q.Type)
	}
	return q
}

// DefaultInstructions is the question text of a question sent without
// instructions (absent or null), per type.
func DefaultInstructions(typ string) string {
	switch typ {
	case TypeNoul:
		return "Is the answer yes?"
	case TypeScore:
		return "Which level fits best?"
	default:
		return "Which option fits best?"
	}
}

func parseInstructions(raw json.RawMessage, path string, l Limits, errs *fieldErrs) string {
	var s string
	switch kindOf(raw) {
	case "string":
		s, _ = stringField(raw, path, errs)
	case "object", "array":
		b, err := canonicalJSON(raw, false)
		if err != nil {
			errs.add(path, "%v", err)
			return ""
		}
		if string(b) == "{}" || string(b) == "[]" {
			errs.add(path, "must not be empty")
			return ""
		}
		s = string(b)
	default:
		errs.add(path, "must be a string, object or array, got %s", kindOf(raw))
		return ""
	}
	switch {
	case strings.TrimSpace(s) == "":
		errs.add(path, "must not be empty or whitespace")
	case len(s) > l.MaxQuestionBytes:
		errs.addLarge(path, "is %d bytes, limit is %d", len(s), l.MaxQuestionBytes)
	}
	return s
}

// criterionText reads a criterion description (see criterionValue) and
// bounds its size by MaxDescriptionBytes, as Decision.Validate does.
func criterionText(raw json.RawMessage, path string, l Limits, errs *fieldErrs) string {
	s := criterionValue(raw, path, errs)
	if len(s) > l.MaxDescriptionBytes {
		errs.addLarge(path, "is %d bytes, limit is %d", len(s), l.MaxDescriptionBytes)
	}
	return s
}

// criterionValue reads a criterion description: a string, null, or an
// object/array rendered as JSON.
func criterionValue(raw json.RawMessage, path string, errs *fieldErrs) string {
	switch kindOf(raw) {
	case "null":
		return ""
	case "string":
		s, _ := stringField(raw, path, errs)
		return s
	case "object", "array":
		b, err := canonicalJSON(raw, false)
		if err != nil {
			errs.add(path, "%v", err)
		}
		return string(b)
	default:
		errs.add(path, "must be a string or null, got %s", kindOf(raw))
		return ""
	}
}

func noulOptions(criteria json.RawMessage, path string, l Limits, errs *fieldErrs) []Option {
	yes, no := "Yes.", "No."
	if criteria != nil {
		members, ok := objectMembers(criteria, path, errs)
		if !ok {
			return nil
		}
		for _, m := range members {
			switch m.Key {
			case "true":
				if t := criterionText(m.Value, join(path, "true"), l, errs); t != "" {
					yes = t
				}
			case "false":
				if t := criterionText(m.Value, join(path, "false"), l, errs); t != "" {
					no = t
				}
			default:
				errs.add(join(path, m.Key), "unknown key (noul criteria take \"true\" and \"false\")")
			}
		}
	}
	return []Option{{ID: "true", Description: yes}, {ID: "false", Description: no}}
}

func choiceOptions(criteria json.RawMessage, path string, l Limits, errs *fieldErrs) []Option {
	if criteria == nil {
		errs.add(path, "is required for choice questions")
		return nil
	}
	members, ok := objectMembers(criteria, path, errs)
	if !ok {
		return nil
	}
	switch {
	case len(members) < 2:
		errs.add(path, "has %d options; "+PhraseTooFewOptions, len(members))
		return nil
	case len(members) > l.MaxOptions:
		errs.add(path, "has %d options; at most %d "+PhraseOptionsPerChoice+" are allowed", len(members), l.MaxOptions)
		return nil
	}
	out := make([]Option, 0, len(members))
	for _, m := range members {
		p := join(path, m.Key)
		if checkID(m.Key, p, l.MaxOptionIDBytes, errs) {
			out = append(out, Option{ID: m.Key, Description: criterionText(m.Value, p, l, errs)})
		}
	}
	return out
}

// scoreOptions reads score levels. A level may be null (the SDK documents
// it): it is scored with an empty description and its legend entry stays
// null; an empty or whitespace string is still refused.
func scoreOptions(criteria json.RawMessage, path string, l Limits, errs *fieldErrs) ([]Option, []bool) {
	if criteria == nil {
		errs.add(path, "is required for score questions")
		return nil, nil
	}
	elems, ok := arrayElems(criteria, path, errs)
	if !ok {
		return nil, nil
	}
	switch {
	case len(elems) < 2:
		errs.add(path, "has %d levels; "+PhraseScoreLevels+" (at least 2)", len(elems))
		return nil, nil
	case len(elems) > l.MaxScoreLevels:
		errs.add(path, "has %d levels; "+PhraseScoreLevels+" (at most %d here)", len(elems), l.MaxScoreLevels)
		return nil, nil
	}
	out := make([]Option, len(elems))
	nulls := make([]bool, len(elems))
	for i, e := range elems {
		p := join(path, i)
		if kindOf(e) == "null" {
			nulls[i] = true
			out[i] = Option{ID: strconv.Itoa(i)}
			continue
		}
		t := criterionText(e, p, l, errs)
		if strings.TrimSpace(t) == "" {
			errs.add(p, "level description must not be empty (send null for an undescribed level)")
		}
		out[i] = Option{ID: strconv.Itoa(i), Description: t}
	}
	return out, nulls
}

// Decisions maps the request onto one decision per question, all sharing
// the state. The decision id is the question key.
func (r *SystemOneRequest) Decisions() []Decision {
	out := make([]Decision, len(r.Questions))
	for i, q := range r.Questions {
		out[i] = Decision{ID: q.Key, State: r.State, Question: q.Instructions, Options: q.Options}
	}
	return out
}

// Confidence is the System One confidence of a distribution over N options:
// clamp((N·p_max − 1)/(N − 1), 0, 1).
func Confidence(probs []float64) float64 {
	n := len(probs)
	if n < 2 {
		return 1
	}
	pmax := 0.0
	for _, p := range probs {
		pmax = math.Max(pmax, p)
	}
	c := (float64(n)*pmax - 1) / float64(n-1)
	return math.Min(1, math.Max(0, c))
}

// SystemOneUsage is the usage block of a response.
type SystemOneUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// SystemOneExtra is verdict's own block inside each answer (key "verdict");
// official clients ignore it.
type SystemOneExtra struct {
	OptionIDs     []string  `json:"option_ids"`
	OptionLogits  []float64 `json:"option_logits"`
	PromptSHA256  string    `json:"prompt_sha256"`
	PromptVersion string    `json:"prompt_version"`
	InputTokens   int       `json:"input_tokens"`
	Temperature   float64   `json:"temperature"`
	Calibrated    bool      `json:"calibrated"`
	Readout       string    `json:"readout"`
	Outcome       *Outcome  `json:"outcome,omitempty"`
	Error         *Error    `json:"error,omitempty"`
}

// SystemOneAnswer renders one answer from a scored result, in the exact
// System One shape, as JSON bytes. Key order: type, value, then legend,
// probabilities, confidence as the type requires, then "verdict".
func SystemOneAnswer(q SystemOneQuestion, r *Result) ([]byte, error) {
	if len(r.Probabilities) != len(r.OptionIDs) || len(r.OptionIDs) == 0 {
		return nil, fmt.Errorf("decision: answer %s: %d probabilities for %d options", q.Key, len(r.Probabilities), len(r.OptionIDs))
	}
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	writeJSONString(&b, q.Type)
	switch q.Type {
	case TypeNoul:
		b.WriteString(`,"noul":`)
		writeFloat(&b, probOf(r, "true"))
	case TypeChoice:
		b.WriteString(`,"choice":`)
		writeJSONString(&b, r.Chosen)
		b.WriteString(`,"probabilities":`)
		writeProbMap(&b, r)
		b.WriteString(`,"confidence":`)
		writeFloat(&b, Confidence(r.Probabilities))
	case TypeScore:
		// The level is the option id ("0".."n-1"), not the position, so that
		// a result with levels removed (authorization) still adds up right.
		exp := 0.0
		for i, p := range r.Probabilities {
			level, err := strconv.Atoi(r.OptionIDs[i])
			if err != nil {
				return nil, fmt.Errorf("decision: answer %s: score option id %q is not a level number", q.Key, r.OptionIDs[i])
			}
			exp += float64(level) * p
		}
		b.WriteString(`,"score":`)
		writeFloat(&b, exp)
		b.WriteString(`,"legend":{`)
		for i, o := range q.Options {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(&b, o.ID)
			b.WriteByte(':')
			if i < len(q.NullLevels) && q.NullLevels[i] {
				b.WriteString("null")
			} else {
				writeJSONString(&b, o.Description)
			}
		}
		b.WriteString(`},"probabilities":`)
		writeProbMap(&b, r)
		b.WriteString(`,"confidence":`)
		writeFloat(&b, Confidence(r.Probabilities))
	}
	extra := SystemOneExtra{
		OptionIDs: r.OptionIDs, OptionLogits: r.OptionLogits, PromptSHA256: r.PromptSHA256,
		PromptVersion: r.PromptVersion, Temperature: r.Temperature, Calibrated: r.Calibrated,
		Readout: r.Readout, Outcome: r.Outcome,
	}
	if r.Tokens != nil {
		extra.InputTokens = r.Tokens.Input
	}
	eb, err := json.Marshal(extra)
	if err != nil {
		return nil, err
	}
	b.WriteString(`,"verdict":`)
	b.Write(eb)
	b.WriteByte('}')
	return b.Bytes(), nil
}

func probOf(r *Result, id string) float64 {
	for i, oid := range r.OptionIDs {
		if oid == id && i < len(r.Probabilities) {
			return r.Probabilities[i]
		}
	}
	return 0
}

func writeProbMap(b *bytes.Buffer, r *Result) {
	b.WriteByte('{')
	for i, id := range r.OptionIDs {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONString(b, id)
		b.WriteByte(':')
		writeFloat(b, r.Probabilities[i])
	}
	b.WriteByte('}')
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // strings always marshal
	b.Write(enc)
}

// writeFloat writes a JSON number that strict clients read as a float:
// always with a decimal point or exponent (1 → 1.0). NaN and ±Inf, which
// JSON cannot carry, are written as 0.0.
func writeFloat(b *bytes.Buffer, f float64) {
	b.WriteString(FormatFloat(f))
}

// FormatFloat formats f as a JSON float literal that always reads back as
// a float: "1.0", "0.25", "1e-07".
func FormatFloat(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "0.0"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// SystemOneResponse renders a whole response body: model, answers in
// question order, usage. answers[i] must be SystemOneAnswer's output for
// r.Questions[i].
func SystemOneResponse(model string, qs []SystemOneQuestion, answers [][]byte, usage SystemOneUsage) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":`)
	writeJSONString(&b, model)
	b.WriteString(`,"answers":{`)
	for i, q := range qs {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, q.Key)
		b.WriteByte(':')
		b.Write(answers[i])
	}
	ub, _ := json.Marshal(usage) // plain ints
	b.WriteString(`},"usage":`)
	b.Write(ub)
	b.WriteByte('}')
	return b.Bytes()
}
