package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/verdict-dev/verdict/decision"
)

// semifShapeProblem checks the envelope of a SemIf body the way the SemIf
// SageMaker adapter contract words it (a JSON object holding exactly one
// of "decision", an object, or "decisions", a non-empty list of at most
// maxBatch objects, and nothing else beside it). verdict also accepts a
// bare decision, so an object without either key is left to the parser
// unless it is empty. It returns "" when the envelope is fine.
func semifShapeProblem(body []byte, maxBatch int) string {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&top); err != nil || top == nil {
		var v any
		if json.Unmarshal(body, &v) == nil {
			return "Request body must be a JSON object"
		}
		return "" // not JSON: the parser says where
	}
	d, haveD := top["decision"]
	ds, haveDs := top["decisions"]
	switch {
	case len(top) == 0 || (haveD && haveDs):
		return "Request must contain exactly one of decision or decisions"
	case !haveD && !haveDs:
		return "" // a bare decision
	}
	var extra []string
	for k := range top {
		if k != "decision" && k != "decisions" {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		q := make([]string, len(extra))
		for i, k := range extra {
			q[i] = fmt.Sprintf("%q", k)
		}
		return "Unsupported request fields: [" + strings.Join(q, ", ") + "]"
	}
	if haveD {
		if kind(d) != '{' {
			return "Request must contain one decision object"
		}
		return ""
	}
	var elems []json.RawMessage
	if kind(ds) != '[' || json.Unmarshal(ds, &elems) != nil || len(elems) == 0 {
		return "Request must contain a nonempty decisions list"
	}
	if len(elems) > maxBatch {
		return fmt.Sprintf("decisions supports at most %d items", maxBatch)
	}
	for _, e := range elems {
		if kind(e) != '{' {
			return "decisions must contain only decision objects"
		}
	}
	return ""
}

func kind(raw json.RawMessage) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// semifParseError maps a SemIf parse error on the SageMaker routes: the
// contract's 400 {"error": …} for shape and field problems (its message
// first when the envelope is wrong), 413 only for sizes other than the
// batch length; verdict's field paths stay under "fields".
func semifParseError(err error, body []byte, maxBatch int) *apiError {
	e := parseError(err)
	shape := semifShapeProblem(body, maxBatch)
	if shape != "" {
		e.contract = shape
	}
	batchTooLong := strings.HasPrefix(shape, "decisions supports at most")
	if e.status != http.StatusRequestEntityTooLarge || batchTooLong {
		e.status = http.StatusBadRequest
		if !errors.Is(err, decision.ErrMalformed) {
			e.code = decision.CodeInvalid
		}
	}
	return e
}

// batchTiming is the batch-level "timing" block of a SemIf batch answer.
type batchTiming struct {
	// BatchSize is the number of decisions in the request.
	BatchSize int `json:"batch_size"`
	// States is the number of distinct states among them (each prefilled once).
	States int `json:"states"`
	// PrefixTokens is the largest state-prefix token count of the batch.
	PrefixTokens int `json:"prefix_tokens"`
	// InputTokens is the sum of the decisions' prompt tokens.
	InputTokens int `json:"input_tokens"`
	// TotalSeconds is the wall time of scoring the batch.
	TotalSeconds float64 `json:"total_seconds"`
}

func newBatchTiming(ds []decision.Decision, rs []decision.Result, seconds float64) batchTiming {
	t := batchTiming{BatchSize: len(ds), TotalSeconds: seconds}
	seen := map[string]bool{}
	for _, d := range ds {
		seen[string(d.State.Canonical())] = true
	}
	t.States = len(seen)
	for _, r := range rs {
		if r.Tokens != nil {
			t.PrefixTokens = max(t.PrefixTokens, r.Tokens.StatePrefix)
			t.InputTokens += r.Tokens.Input
		}
	}
	return t
}
