package lambda

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

// Feedback paths.
const (
	// PathReviews is the review inbox.
	PathReviews = "/v1/reviews"
	// feedbackSuffix ends PathDecisions + "/{id}" for the feedback call.
	feedbackSuffix = "/feedback"
)

// maxFeedbackBody bounds a feedback body: an option id, a source and a
// note.
const maxFeedbackBody = 16 << 10

// EventFeedback is the Kind of the sink event a recorded answer publishes.
const EventFeedback = "feedback"

// isFeedbackPath reports whether path is POST /v1/decisions/{id}/feedback.
func isFeedbackPath(path string) bool {
	return strings.HasPrefix(path, PathDecisions+"/") && strings.HasSuffix(path, feedbackSuffix) &&
		len(path) > len(PathDecisions)+1+len(feedbackSuffix)
}

// feedback records the true answer for one of the caller's published
// decisions (results.GiveFeedback), publishes it to the feedback sinks
// and tells the observer: 201 for a new answer, 200 for a replay of the
// current one.
func (h *Handler) feedback(ctx context.Context, req *Request) *Response {
	caller, r := h.resultsCaller(req, http.MethodPost)
	if r != nil {
		return r
	}
	if r := checkContentType(req.Header.Get("Content-Type")); r != nil {
		return r
	}
	if len(req.Body) > maxFeedbackBody {
		return errorResponse(ErrorBody{Code: decision.CodeTooLarge, Message: fmt.Sprintf("body is %d bytes, limit is %d", len(req.Body), maxFeedbackBody)})
	}
	raw := strings.TrimSuffix(strings.TrimPrefix(req.Path, PathDecisions+"/"), feedbackSuffix)
	decID, err := url.PathUnescape(raw)
	if err == nil {
		err = checkLookupID(decID)
	}
	if err != nil {
		return errorResponse(ErrorBody{Code: decision.CodeMalformed, Message: "malformed decision id in the path: " + err.Error()})
	}
	reqID := req.Query.Get("request_id")
	if err := checkLookupID(reqID); err != nil {
		return errorResponse(ErrorBody{Code: decision.CodeInvalid, Message: "request_id is required: the request the decision belongs to",
			Fields: []decision.FieldError{{Path: "request_id", Message: "is required (?request_id=…): " + err.Error()}}})
	}
	var body struct {
		Option string `json:"option"`
		Source string `json:"source"`
		Note   string `json:"note"`
	}
	dec := json.NewDecoder(bytes.NewReader(req.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || dec.More() {
		msg := "the body is not a JSON object {\"option\", \"source\", \"note\"}"
		if err != nil {
			msg += ": " + err.Error()
		}
		return errorResponse(ErrorBody{Code: decision.CodeMalformed, Message: msg})
	}
	fb := results.Feedback{RequestID: reqID, DecisionID: decID, Tenant: caller.Tenant, Option: body.Option,
		Source: body.Source, Note: body.Note, By: caller.by(), At: h.cfg.NowFunc().UTC()}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	a, err := results.GiveFeedback(ctx, h.cfg.Results, fb)
	var fe *results.InputError
	switch {
	case errors.As(err, &fe):
		return errorResponse(ErrorBody{Code: decision.CodeInvalid, Message: "the feedback breaks a field rule", Fields: fe.Fields})
	case errors.Is(err, results.ErrNotFound):
		return errorResponse(ErrorBody{Code: decision.CodeNotFound, Message: fmt.Sprintf("no decision %q in request %q", decID, reqID)})
	case errors.Is(err, results.ErrNotPublished):
		return errorResponse(ErrorBody{Code: decision.CodeConflict,
			Message: fmt.Sprintf("decision %q has no result yet: feedback is for published decisions", decID)})
	case err != nil:
		return h.storeFailed(ctx, "feedback", req, err)
	}
	if a.Replay {
		return jsonResponse(http.StatusOK, a)
	}
	if h.cfg.OnFeedback != nil {
		h.cfg.OnFeedback(a.Stored, a.Label)
	}
	h.publishFeedback(ctx, a.Label, len(a.History))
	return jsonResponse(http.StatusCreated, a)
}

// publishFeedback sends a recorded answer, the decision's n-th (from 0),
// to the feedback sinks. The answer is stored whatever they do: a failure
// is logged. Its key names the decision and n, so each answer has its
// own and FIFO targets never take one for another.
func (h *Handler) publishFeedback(ctx context.Context, fb results.Feedback, n int) {
	if len(h.cfg.FeedbackSinks) == 0 {
		return
	}
	body, err := json.Marshal(fb)
	if err != nil {
		return
	}
	ev := sink.Event{Kind: EventFeedback, RequestID: fb.RequestID, DecisionID: fb.DecisionID,
		Key: fb.RequestID + "/" + fb.DecisionID + "/feedback/" + strconv.Itoa(n), Body: body}
	for _, s := range h.cfg.FeedbackSinks {
		if err := s.PublishEvents(ctx, []sink.Event{ev}); err != nil {
			h.cfg.Logger.WarnContext(ctx, "front door: publish feedback failed; the answer is stored", "sink", s.Name(), "err", err,
				"request_id", fb.RequestID, "decision_id", fb.DecisionID)
		}
	}
}

// reviews answers GET /v1/reviews: one page of the caller's tenant's open
// reviews, oldest first, for keys granted review only (they show states).
func (h *Handler) reviews(ctx context.Context, req *Request) *Response {
	caller, r := h.resultsCaller(req, http.MethodGet)
	if r != nil {
		return r
	}
	if !caller.Review && h.auth.Enabled() {
		return errorResponse(ErrorBody{Code: decision.CodeForbidden,
			Message: "this key may not read the review inbox: grant it with KEY=TENANT:review in the API keys"})
	}
	limit := 50
	if v := req.Query.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > results.MaxReviewsPage {
			return errorResponse(ErrorBody{Code: decision.CodeInvalid, Message: "bad limit",
				Fields: []decision.FieldError{{Path: "limit", Message: fmt.Sprintf("must be an integer from 1 to %d", results.MaxReviewsPage)}}})
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	page, next, err := h.cfg.Results.Reviews(ctx, caller.Tenant, req.Query.Get("cursor"), limit)
	var fe *results.InputError
	switch {
	case errors.As(err, &fe):
		return errorResponse(ErrorBody{Code: decision.CodeInvalid, Message: "bad cursor", Fields: fe.Fields})
	case err != nil:
		return h.storeFailed(ctx, "reviews", req, err)
	}
	out := ReviewPage{Reviews: make([]ReviewItem, 0, len(page)), NextCursor: next}
	for _, rv := range page {
		out.Reviews = append(out.Reviews, reviewItem(rv))
	}
	return jsonResponse(http.StatusOK, out)
}

// ReviewPage is the answer of GET /v1/reviews.
type ReviewPage struct {
	Reviews []ReviewItem `json:"reviews"`
	// NextCursor continues the list (?cursor=); "" on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// ReviewItem is one open review: what a reviewer reads to answer it.
type ReviewItem struct {
	RequestID   string         `json:"request_id"`
	DecisionID  string         `json:"decision_id"`
	Kind        string         `json:"kind,omitempty"`
	State       string         `json:"state"`
	Question    string         `json:"question"`
	Options     []ReviewOption `json:"options"`
	Chosen      string         `json:"chosen,omitempty"`
	Reason      string         `json:"reason,omitempty"`
	SubmittedAt string         `json:"submitted_at"`
	StoredAt    string         `json:"stored_at"`
}

// ReviewOption is an option of a review with the model's probability.
type ReviewOption struct {
	ID          string  `json:"id"`
	Description string  `json:"description"`
	Probability float64 `json:"probability"`
}

func reviewItem(rv results.Review) ReviewItem {
	rec := rv.Stored.Record
	it := ReviewItem{RequestID: rec.RequestID, DecisionID: rec.DecisionID, Kind: rec.Result.Kind, State: rv.Input.State.Text,
		Question: rv.Input.Question, Chosen: rec.Result.Chosen,
		SubmittedAt: rec.SubmittedAt.UTC().Format("2006-01-02T15:04:05Z"), StoredAt: rv.Stored.StoredAt.UTC().Format("2006-01-02T15:04:05.000Z")}
	if rec.Result.Outcome != nil {
		it.Reason = rec.Result.Outcome.Reason
	}
	prob := map[string]float64{}
	for i, id := range rec.Result.OptionIDs {
		if i < len(rec.Result.Probabilities) {
			prob[id] = rec.Result.Probabilities[i]
		}
	}
	for _, o := range rv.Input.Options {
		it.Options = append(it.Options, ReviewOption{ID: o.ID, Description: o.Description, Probability: prob[o.ID]})
	}
	return it
}

// by is who a caller is in a feedback record: the platform identity, else
// the first 12 hex digits of its key's sha256, else "anonymous".
func (c Caller) by() string {
	switch {
	case c.Identity != "":
		return c.Identity
	case c.APIKey != "":
		sum := sha256.Sum256([]byte(c.APIKey))
		return "key:" + hex.EncodeToString(sum[:6])
	}
	return "anonymous"
}

func noResultsHere() *Response {
	return errorResponse(ErrorBody{Code: decision.CodeNotFound,
		Message: "results are not stored here: read them where the workers publish them (the results queue, topic or webhook)"})
}

// storeFailed answers a failed results store 503 with Retry-After and
// logs the cause (a missing table, a missing permission).
func (h *Handler) storeFailed(ctx context.Context, what string, req *Request, err error) *Response {
	h.cfg.Logger.WarnContext(ctx, "front door: results store failed", "call", what, "err", err, "path", trimForMessage(req.Path))
	r := errorResponse(ErrorBody{Code: decision.CodeUnavailable, Message: "the results store is unavailable; retry later"})
	r.Header.Set("Retry-After", strconv.Itoa(retryAfterSeconds(h.cfg.RetryAfter)))
	return r
}
