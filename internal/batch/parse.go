package batch

import (
	"encoding/json"
	"fmt"

	"github.com/verdict-dev/verdict/decision"
)

// Formats of an input line.
const (
	FormatSemIf     = "semif"
	FormatSystemOne = "systemone"
)

// Item is one parsed input line.
type Item struct {
	// Line is the 1-based input line number.
	Line int
	// Format is FormatSemIf or FormatSystemOne.
	Format string
	// ID is the line's own "id" for System One requests and SemIf batches
	// that carry one (JevBench cases do); for a single SemIf decision, its id.
	ID string
	// Decisions to score (one per question for System One).
	Decisions []decision.Decision
	// Types holds the System One question types, by question key.
	Types map[string]string
	// Err is the parse or validation error; Decisions is then empty.
	Err *decision.Error

	results []decision.Result
}

// ParseLine parses one JSONL line in either format: a SemIf decision, a
// wrapped decision or a batch ({"decisions": […]}), or a System One request
// ({"state", "questions"}, unknown fields ignored, so a JevBench case
// parses as it is).
func ParseLine(no int, data []byte, l decision.Limits) Item {
	it := Item{Line: no, Format: FormatSemIf}
	if decision.LooksLikeSystemOne(data) {
		it.Format = FormatSystemOne
		req, err := decision.ParseSystemOne(data, l)
		if err != nil {
			it.Err = LineError(err)
			return it
		}
		it.Decisions = req.Decisions()
		it.Types = make(map[string]string, len(req.Questions))
		for _, q := range req.Questions {
			it.Types[q.Key] = q.Type
		}
		var head struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(data, &head) == nil && len(head.ID) > 0 {
			var s string
			if json.Unmarshal(head.ID, &s) == nil {
				it.ID = s
			} else {
				it.ID = string(head.ID)
			}
		}
		return it
	}
	ds, shape, err := decision.ParseSemIf(data, l)
	if err != nil {
		it.Err = LineError(err)
		return it
	}
	it.Decisions = ds
	if shape != decision.ShapeBatch && len(ds) == 1 {
		it.ID = ds[0].ID
	}
	return it
}

// TooLongError is the error result of a line over the length limit.
func TooLongError(n int64, maxLine int) *decision.Error {
	msg := fmt.Sprintf("line is %d bytes, longer than --max-line-bytes (%d); skipped", n, maxLine)
	return &decision.Error{Code: decision.CodeTooLarge, Message: msg, Fields: []decision.FieldError{{Path: "", Message: msg}}}
}

// LineError turns a parse error into an error result naming the fields.
func LineError(err error) *decision.Error {
	return decision.ErrorFor(err, decision.CodeInvalid)
}
