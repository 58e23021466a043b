package lambda

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/auth"
	"github.com/verdict-dev/verdict/internal/queue"
)

// Paths served by the handler.
const (
	PathDecisions      = "/v1/decisions"
	PathSystemOneAsync = "/v1/systemone/async"
	// PathRequests + id is a request's status and results (with Results).
	PathRequests = "/v1/requests/"
)

// maxBatch is the most messages one Send call takes (an SQS batch).
const maxBatch = 10

// Request is one HTTP request, whatever transport brought it.
type Request struct {
	// Method is the HTTP method.
	Method string
	// Path is the URL path without the query.
	Path string
	// Header holds the request headers (any case; looked up canonically).
	Header http.Header
	// Query is the URL's query.
	Query url.Values
	// Body is the decoded request body.
	Body []byte
	// Identity is the authorizer identity from the request context (set by
	// the Lambda adapters), "" when there is none.
	Identity string
	// PlatformRequestID is the transport's request id, for logs only.
	PlatformRequestID string
}

// Response is what the handler answers.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Header holds the response headers.
	Header http.Header
	// Body is JSON.
	Body []byte
}

// Accepted is the body of a 202 answer.
type Accepted struct {
	// RequestID identifies the request; results are keyed by it and by the
	// decision id.
	RequestID string `json:"request_id"`
	// Status is "queued".
	Status string `json:"status"`
	// Route is the pool the request was sent to; "mixed" when its groups
	// went to different pools (see Decisions[i].Route).
	Route string `json:"route"`
	// DecisionIDs are the decision ids in request order (System One: the
	// question keys).
	DecisionIDs []string `json:"decision_ids"`
	// Decisions details each decision.
	Decisions []AcceptedDecision `json:"decisions"`
	// Messages is the number of queue messages written.
	Messages int `json:"messages"`
	// Results is where the request's results will appear.
	Results string `json:"results,omitempty"`
	// Model echoes the System One model asked for.
	Model string `json:"model,omitempty"`
}

// AcceptedDecision is one decision of an Accepted answer.
type AcceptedDecision struct {
	ID       string `json:"id"`
	Route    string `json:"route"`
	GroupKey string `json:"group_key"`
	Results  string `json:"results,omitempty"`
}

// ErrorBody is the body of every error answer: verdict's one error shape.
// Message is always set (the System One clients read it); Code is one of
// decision's codes and decides the status.
type ErrorBody = decision.ErrorBody

// Handler is the front door. It is safe for concurrent use.
type Handler struct {
	cfg  Config
	auth *auth.Authenticator
}

// New checks cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.withDefaults()
	a, err := auth.New(cfg.APIKeys, cfg.AllowAnonymous)
	if err != nil {
		return nil, fmt.Errorf("%w: APIKeys: %w", ErrConfig, err)
	}
	return &Handler{cfg: cfg, auth: a}, nil
}

// Handle answers one request. It never panics: a panic in a dependency is
// logged and answered 500.
func (h *Handler) Handle(ctx context.Context, req *Request) (resp *Response) {
	defer func() {
		if p := recover(); p != nil {
			h.cfg.Logger.ErrorContext(ctx, "front door: panic", "panic", fmt.Sprint(p), "platform_request_id", req.PlatformRequestID)
			resp = errorResponse(ErrorBody{Code: decision.CodeInternal, Message: "internal error"})
		}
		withRequestID(resp, req.PlatformRequestID)
	}()
	switch {
	case isFeedbackPath(req.Path):
		return h.feedback(ctx, req)
	case req.Path == PathReviews:
		return h.reviews(ctx, req)
	case strings.HasPrefix(req.Path, PathRequests) || strings.HasPrefix(req.Path, PathDecisions+"/") && len(req.Path) > len(PathDecisions)+1:
		return h.lookup(ctx, req)
	}
	var format string
	switch req.Path {
	case PathDecisions, PathDecisions + "/":
		format = queue.FormatSemIf
	case PathSystemOneAsync, PathSystemOneAsync + "/":
		format = queue.FormatSystemOne
	default:
		return errorResponse(ErrorBody{Code: decision.CodeNotFound, Message: "no such endpoint: " + trimForMessage(req.Path)})
	}
	if req.Method != http.MethodPost {
		r := errorResponse(ErrorBody{Code: decision.CodeMethodNotAllowed, Message: "use POST"})
		r.Header.Set("Allow", http.MethodPost)
		return r
	}
	if r := checkContentType(req.Header.Get("Content-Type")); r != nil {
		return r
	}
	if len(req.Body) > h.cfg.MaxBodyBytes {
		return errorResponse(ErrorBody{Code: decision.CodeTooLarge,
			Message: fmt.Sprintf("body is %d bytes, limit is %d", len(req.Body), h.cfg.MaxBodyBytes)})
	}
	caller, r := h.Authenticate(req)
	if r != nil {
		return r
	}
	return h.accept(ctx, req, caller, format)
}

func (h *Handler) accept(ctx context.Context, req *Request, caller Caller, format string) *Response {
	var (
		ds    []decision.Decision
		model string
		err   error
	)
	if format == queue.FormatSystemOne {
		var s1 *decision.SystemOneRequest
		if s1, err = decision.ParseSystemOne(req.Body, h.cfg.Limits); err == nil {
			ds, model = s1.Decisions(), s1.Model
		}
	} else if ds, _, err = decision.ParseSemIf(req.Body, h.cfg.Limits); err == nil {
		for i := range ds {
			if ds[i].ID == "" {
				ds[i].ID = strconv.Itoa(i)
			}
		}
	}
	if err != nil {
		return parseErrorResponse(err)
	}

	for i := range ds {
		if err := h.authorize(ctx, caller, &ds[i]); err != nil {
			if errors.Is(err, ErrForbidden) {
				return errorResponse(ErrorBody{Code: decision.CodeForbidden, Message: forbiddenMessage(ds[i].ID, err)})
			}
			h.cfg.Logger.ErrorContext(ctx, "front door: authorization failed", "err", err, "tenant", caller.Tenant, "platform_request_id", req.PlatformRequestID)
			return errorResponse(ErrorBody{Code: decision.CodeInternal, Message: "internal error"})
		}
	}

	basis := dedupBasis(caller, req)
	reqID := requestID(basis, req.Header.Get("Idempotency-Key") != "")
	now := h.cfg.NowFunc().UTC()

	// Group decisions by state, keeping the order of first appearance.
	type group struct {
		key string
		ds  []decision.Decision
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, d := range ds {
		k := h.cfg.GroupKeyFunc(d.State)
		g := byKey[k]
		if g == nil {
			g = &group{key: k}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.ds = append(g.ds, d)
	}

	out := map[decision.Route][]queue.Outgoing{}
	var routes []decision.Route
	groupRoute := map[string]decision.Route{}
	for _, g := range groups {
		route := h.route(g.ds)
		env := queue.Envelope{
			Version: queue.EnvelopeVersion, RequestID: reqID, Tenant: caller.Tenant, SubmittedAt: now,
			Route: route, GroupKey: g.key, Format: format, Model: model, Decisions: g.ds,
			APIKeySHA256: keyHash(caller.APIKey),
		}
		body, err := env.Marshal()
		if errors.Is(err, queue.ErrTooLarge) {
			return errorResponse(ErrorBody{Code: decision.CodeTooLarge, RequestID: reqID,
				Message: fmt.Sprintf("the decisions sharing one state do not fit in one queue message (%d bytes); send fewer or smaller decisions", queue.MaxMessageBytes)})
		} else if err != nil {
			h.cfg.Logger.ErrorContext(ctx, "front door: encode envelope", "err", err, "request_id", reqID)
			return errorResponse(ErrorBody{Code: decision.CodeInternal, Message: "internal error", RequestID: reqID})
		}
		if _, seen := out[route]; !seen {
			routes = append(routes, route)
		}
		out[route] = append(out[route], queue.Outgoing{
			Body:       body,
			GroupID:    g.key,
			DedupID:    dedupID(dedupBasisFor(basis, reqID, req.Header.Get("Idempotency-Key") != ""), g.key),
			Attributes: attributes(reqID, route, format, caller.Tenant),
		})
		groupRoute[g.key] = route
	}

	acc := Accepted{RequestID: reqID, Status: "queued", Model: model, Messages: len(groups),
		Results: expand(h.cfg.ResultsLocation, reqID, "")}
	for _, d := range ds {
		k := h.cfg.GroupKeyFunc(d.State)
		acc.DecisionIDs = append(acc.DecisionIDs, d.ID)
		acc.Decisions = append(acc.Decisions, AcceptedDecision{ID: d.ID, Route: string(groupRoute[k]), GroupKey: k,
			Results: expand(h.cfg.DecisionLocation, reqID, d.ID)})
	}
	if len(routes) == 1 {
		acc.Route = string(routes[0])
	} else {
		acc.Route = "mixed"
	}

	unavailable := func() *Response {
		r := errorResponse(ErrorBody{Code: decision.CodeUnavailable, RequestID: reqID,
			Message: "the queue is unavailable; retry later with the same Idempotency-Key"})
		r.Header.Set("Retry-After", strconv.Itoa(retryAfterSeconds(h.cfg.RetryAfter)))
		return r
	}
	sctx, cancel := context.WithTimeout(ctx, h.cfg.SendTimeout)
	defer cancel()
	for _, route := range routes {
		if err := h.send(sctx, route, out[route]); err != nil {
			h.cfg.Logger.WarnContext(ctx, "front door: enqueue failed", "err", err, "request_id", reqID, "route", route)
			return unavailable()
		}
	}
	// Recorded only once it is queued: a request answered 503 must not be
	// reported as queued. The work is queued whatever the record does, so
	// a failed record still answers 202.
	if h.cfg.Results != nil {
		if err := h.cfg.Results.Accept(sctx, accepted(caller, &acc, now)); err != nil {
			h.cfg.Logger.WarnContext(ctx, "front door: record request failed; its status is known once results are stored", "err", err, "request_id", reqID)
		}
	}

	resp := jsonResponse(http.StatusAccepted, acc)
	if acc.Results != "" && strings.HasPrefix(acc.Results, "/") {
		resp.Header.Set("Location", acc.Results)
	}
	resp.Header.Set("X-Request-Id", reqID)
	if format == queue.FormatSystemOne {
		resp.Header.Set("X-Typesafe-Request-Id", reqID)
	}
	return resp
}

func (h *Handler) authorize(ctx context.Context, c Caller, d *decision.Decision) error {
	if h.cfg.AuthorizeFunc == nil {
		return nil
	}
	return h.cfg.AuthorizeFunc(ctx, c, d)
}

// route asks the router, then falls back to the other queue when the
// chosen one is not configured.
func (h *Handler) route(ds []decision.Decision) decision.Route {
	r := decision.RouteCPU
	if h.cfg.Router != nil {
		r = h.cfg.Router.Choose(ds)
	}
	if _, ok := h.cfg.Queues[r]; ok {
		return r
	}
	for _, alt := range []decision.Route{decision.RouteCPU, decision.RouteGPU} {
		if _, ok := h.cfg.Queues[alt]; ok {
			return alt
		}
	}
	return r
}

// send enqueues msgs on route's queue in batches of ten. Any failed
// message fails the request: the client retries with the same key, and
// the dedup id keeps what was already enqueued from being enqueued again
// (FIFO queues; results are idempotent on standard queues).
func (h *Handler) send(ctx context.Context, route decision.Route, msgs []queue.Outgoing) error {
	s := h.cfg.Queues[route]
	for start := 0; start < len(msgs); start += maxBatch {
		end := min(start+maxBatch, len(msgs))
		perMsg, err := s.Send(ctx, msgs[start:end])
		if err != nil {
			return err
		}
		for i, e := range perMsg {
			if e != nil {
				return fmt.Errorf("message %d: %w", start+i, e)
			}
		}
		if len(perMsg) != end-start {
			return fmt.Errorf("sender answered %d results for %d messages", len(perMsg), end-start)
		}
	}
	return nil
}

// dedupBasis identifies a client request across retries: the tenant and
// the Idempotency-Key header, or the tenant and the body's sha256.
func dedupBasis(c Caller, req *Request) string {
	h := sha256.New()
	h.Write([]byte(c.Tenant))
	h.Write([]byte{0})
	h.Write([]byte(req.Path))
	h.Write([]byte{0})
	if k := req.Header.Get("Idempotency-Key"); k != "" {
		h.Write([]byte("key:" + k))
	} else {
		h.Write([]byte("body:"))
		h.Write(req.Body)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// requestID is derived from the basis when the client sent an
// Idempotency-Key (a retry gets the same id), else random.
func requestID(basis string, keyed bool) string {
	if keyed {
		return "req_" + basis[:32]
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// dedupBasisFor is what deduplication is keyed on: the Idempotency-Key
// basis when the client sent one (a retry is the same request), else the
// request id itself. Two identical bodies sent without a key are two
// requests with two ids; deduplicating them by body would answer 202 for
// the second and never deliver its results.
func dedupBasisFor(basis, reqID string, keyed bool) string {
	if keyed {
		return basis
	}
	return reqID
}

// dedupID is the FIFO MessageDeduplicationId of one group's message.
func dedupID(basis, groupKey string) string {
	s := sha256.Sum256([]byte(basis + "/" + groupKey))
	return hex.EncodeToString(s[:])
}

// attributes are the message attributes of one message; SQS refuses
// empty values, so empty ones are left out.
func attributes(reqID string, route decision.Route, format, tenant string) map[string]string {
	a := map[string]string{"request_id": reqID, "route": string(route), "format": format}
	if tenant != "" {
		a["tenant"] = tenant
	}
	return a
}

func expand(tmpl, reqID, decID string) string {
	if tmpl == "" {
		return ""
	}
	return strings.NewReplacer("{request_id}", url.PathEscape(reqID), "{decision_id}", url.PathEscape(decID)).Replace(tmpl)
}

func retryAfterSeconds(d interface{ Seconds() float64 }) int {
	s := int(d.Seconds() + 0.999)
	return max(s, 1)
}

func checkContentType(ct string) *Response {
	if ct == "" {
		return errorResponse(ErrorBody{Code: decision.CodeUnsupportedMediaType, Message: "Content-Type is required: application/json"})
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return errorResponse(ErrorBody{Code: decision.CodeUnsupportedMediaType, Message: fmt.Sprintf("Content-Type %q is not supported; use application/json", trimForMessage(ct))})
	}
	return nil
}

// parseErrorResponse answers a parse error: decision.CodeOf says which
// (400 malformed, 413 too large, 422 invalid), with the field paths.
func parseErrorResponse(err error) *Response {
	e := ErrorBody{Code: decision.CodeOf(err, decision.CodeInvalid), Message: err.Error()}
	var ve *decision.ValidationError
	if errors.As(err, &ve) {
		e.Fields = ve.Errors
	}
	if e.Code == decision.CodeMalformed {
		e.Message = strings.TrimPrefix(e.Message, "decision: ")
	}
	return errorResponse(e)
}

func forbiddenMessage(id string, err error) string {
	msg := strings.TrimPrefix(err.Error(), ErrForbidden.Error())
	msg = strings.TrimLeft(msg, ": ")
	if msg == "" {
		msg = "not allowed"
	}
	return fmt.Sprintf("decision %q: %s", id, msg)
}

func trimForMessage(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// JSONResponse builds a JSON answer (for servers that add routes).
func JSONResponse(status int, v any) *Response { return jsonResponse(status, v) }

// ErrorResponse builds an error answer in the handler's error shape, with
// the status of its code.
func ErrorResponse(e ErrorBody) *Response { return errorResponse(e) }

// Write writes r to w. An error answer without a request id gets one
// first (see withRequestID).
func (r *Response) Write(w http.ResponseWriter) {
	withRequestID(r, "")
	for k, v := range r.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(r.Status)
	_, _ = w.Write(r.Body)
}

func jsonResponse(status int, v any) *Response {
	b, err := json.Marshal(v)
	if err != nil { // our own types always encode
		b = []byte(`{"code":"internal","message":"internal error"}`)
		status = http.StatusInternalServerError
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return &Response{Status: status, Header: h, Body: b}
}

func errorResponse(e ErrorBody) *Response { return jsonResponse(e.Code.Status(), e) }

// keyHash is the hex sha256 of an API key ("" for none): what envelopes
// carry so the worker's policy can authorize by key without the key.
func keyHash(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
