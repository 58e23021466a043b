package results

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/sink"
)

// Feedback is one true answer a caller gave for a published decision.
// The newest is the decision's label; the older ones stay, with who sent
// each and when.
type Feedback struct {
	RequestID  string `json:"request_id"`
	DecisionID string `json:"decision_id"`
	Tenant     string `json:"tenant,omitempty"`
	// Option is the option id the caller says was right.
	Option string `json:"option"`
	// Source names where the answer came from ("zendesk", "review").
	Source string `json:"source,omitempty"`
	// Note is free text.
	Note string `json:"note,omitempty"`
	// By is who sent it: the caller's identity, else the first 12 hex
	// digits of its key's sha256, else "anonymous".
	By string `json:"by"`
	// At is when the front door received it.
	At time.Time `json:"at"`
}

// replays says whether fb repeats the decision's current label (the last
// of history): a replay, which records nothing new.
func replays(history []Feedback, fb Feedback) bool {
	if len(history) == 0 {
		return false
	}
	g := history[len(history)-1]
	return fb.Option == g.Option && fb.Source == g.Source && fb.Note == g.Note && fb.By == g.By
}

// Review is an open decision whose outcome was review: what a reviewer
// needs to answer it.
type Review struct {
	// Input is the decision as it was scored: state, question, options.
	Input decision.Decision
	// Stored is its published record: probabilities and the policy's
	// reason.
	Stored Stored
}

// Labeled is a published decision and its current label.
type Labeled struct {
	Stored Stored
	Label  Feedback
}

// LabelFilter picks labeled decisions: one tenant's, labeled in
// [From, To) (a zero bound is open), of one policy kind when Kind is set.
type LabelFilter struct {
	Tenant   string
	Kind     string
	From, To time.Time
}

// Field limits of feedback.
const (
	maxSourceBytes = 256
	maxNoteBytes   = 4 << 10
	// MaxReviewsPage bounds one page of the review inbox.
	MaxReviewsPage = 200
)

// Errors of the feedback call, beside ErrUnavailable.
var (
	// ErrNotFound: no such decision for this caller (unknown, or another
	// tenant's).
	ErrNotFound = errors.New("results: no such decision")
	// ErrNotPublished: the decision has no result yet.
	ErrNotPublished = errors.New("results: the decision has no result yet")
)

// InputError is input that breaks a field rule (a feedback body, an
// inbox cursor): Fields name each problem by its path.
type InputError struct {
	Fields []decision.FieldError
}

func (e *InputError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Path + ": " + f.Message
	}
	return "results: invalid input: " + strings.Join(parts, "; ")
}

// Answer is what the feedback call answers: the decision's label and the
// answers before it, oldest first.
type Answer struct {
	RequestID  string     `json:"request_id"`
	DecisionID string     `json:"decision_id"`
	Label      Feedback   `json:"label"`
	History    []Feedback `json:"history"`
	// Replay is true when the call repeated the current label: nothing
	// new was recorded.
	Replay bool `json:"replay"`
	// Stored is the decision's published record, for the caller's
	// observers (live quality); not part of the answer's JSON.
	Stored Stored `json:"-"`
}

// GiveFeedback checks fb against the decision it names, as tenant's
// caller sees it, and records it: ErrNotFound for an unknown decision or
// another tenant's, ErrNotPublished while it has no result, a
// *InputError for an option the decision did not offer or a bad
// field. Sending the current label again is a replay: nothing new is
// recorded.
func GiveFeedback(ctx context.Context, s Store, fb Feedback) (Answer, error) {
	if err := checkFeedback(fb); err != nil {
		return Answer{}, err
	}
	e, err := s.Request(ctx, fb.RequestID)
	if err != nil {
		return Answer{}, err
	}
	st, found, err := status(e, fb.Tenant, fb.RequestID)
	if err != nil {
		return Answer{}, err
	}
	if !found || !slices.ContainsFunc(st.Decisions, func(d Decision) bool { return d.ID == fb.DecisionID }) {
		return Answer{}, fmt.Errorf("%w: %q in request %q", ErrNotFound, fb.DecisionID, fb.RequestID)
	}
	var rec *Stored
	for i := range e.Records {
		if e.Records[i].Record.DecisionID == fb.DecisionID {
			rec = &e.Records[i]
		}
	}
	if rec == nil {
		return Answer{}, fmt.Errorf("%w: %q in request %q", ErrNotPublished, fb.DecisionID, fb.RequestID)
	}
	if offered := rec.Record.Result.OptionIDs; !slices.Contains(offered, fb.Option) {
		return Answer{}, &InputError{Fields: []decision.FieldError{{Path: "option",
			Message: fmt.Sprintf("%q is not an option of this decision (offered: %s)", fb.Option, strings.Join(quoteAll(offered), ", "))}}}
	}
	history, replay, err := s.Label(ctx, fb)
	if err != nil {
		return Answer{}, err
	}
	a := Answer{RequestID: fb.RequestID, DecisionID: fb.DecisionID, Replay: replay, History: []Feedback{}, Stored: *rec}
	if n := len(history); n > 0 {
		a.Label, a.History = history[n-1], history[:n-1]
	}
	return a, nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// checkFeedback applies the field rules of a feedback body.
func checkFeedback(fb Feedback) error {
	var fields []decision.FieldError
	add := func(path, format string, args ...any) {
		fields = append(fields, decision.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if strings.TrimSpace(fb.Option) == "" {
		add("option", "is required: the id of the option that was right")
	} else if p := decision.IDProblem(fb.Option, decision.DefaultLimits().MaxOptionIDBytes); p != "" {
		add("option", "%s", p)
	}
	if !utf8.ValidString(fb.Source) || len(fb.Source) > maxSourceBytes {
		add("source", "must be valid UTF-8 of at most %d bytes", maxSourceBytes)
	}
	if !utf8.ValidString(fb.Note) || len(fb.Note) > maxNoteBytes {
		add("note", "must be valid UTF-8 of at most %d bytes", maxNoteBytes)
	}
	if len(fields) > 0 {
		return &InputError{Fields: fields}
	}
	return nil
}

// reviewOpen says whether a stored record opens a review: its outcome is
// review and the worker kept its input.
func reviewOpen(r *sink.Record) bool {
	return r.Status == decision.StatusReview && r.Input != nil
}

// A cursor is opaque to callers: base64url of the position it stands for.
func encodeCursor(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func decodeCursor(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
