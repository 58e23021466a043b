package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/results"
)

// lookupTimeout bounds one lookup's calls to the results store.
const lookupTimeout = 10 * time.Second

// maxLookupID bounds the id in a lookup path: a decision id's limit, with
// room for request ids.
const maxLookupID = 512

// lookup answers GET /v1/requests/{id} and GET /v1/decisions/{id}
// (?request_id= picks one request) from the results store, with the
// same statuses and bodies on every front door: 404 for an unknown id
// and for another tenant's, 400 for an id no request could have, 503
// with Retry-After when the store fails.
func (h *Handler) lookup(ctx context.Context, req *Request) *Response {
	caller, r := h.resultsCaller(req, http.MethodGet)
	if r != nil {
		return r
	}
	byRequest := strings.HasPrefix(req.Path, PathRequests)
	raw := strings.TrimPrefix(strings.TrimPrefix(req.Path, PathRequests), PathDecisions+"/")
	id, err := url.PathUnescape(raw)
	if err == nil {
		err = checkLookupID(id)
	}
	if err != nil {
		return errorResponse(ErrorBody{Code: decision.CodeMalformed, Message: "malformed id in the path: " + err.Error()})
	}
	reqID := req.Query.Get("request_id")
	if reqID != "" {
		if err := checkLookupID(reqID); err != nil {
			return errorResponse(ErrorBody{Code: decision.CodeMalformed, Message: "malformed request_id: " + err.Error()})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	var (
		body  any
		found bool
	)
	if byRequest {
		body, found, err = results.LookupRequest(ctx, h.cfg.Results, caller.Tenant, id)
	} else {
		body, found, err = results.LookupDecision(ctx, h.cfg.Results, caller.Tenant, id, reqID)
	}
	switch {
	case err != nil:
		return h.storeFailed(ctx, "lookup", req, err)
	case !found && byRequest:
		return errorResponse(ErrorBody{Code: decision.CodeNotFound, Message: fmt.Sprintf("no request %q", id)})
	case !found:
		return errorResponse(ErrorBody{Code: decision.CodeNotFound, Message: fmt.Sprintf("no decision %q", id)})
	}
	return jsonResponse(http.StatusOK, body)
}

// checkLookupID refuses an id no request or decision could have, by the
// rule every id follows (decision.IDProblem).
func checkLookupID(id string) error {
	if p := decision.IDProblem(id, maxLookupID); p != "" {
		return errors.New("the id " + p)
	}
	return nil
}

// accepted is what the results store records of a 202 answer.
func accepted(c Caller, a *Accepted, at time.Time) results.Accepted {
	out := results.Accepted{RequestID: a.RequestID, Tenant: c.Tenant, Model: a.Model, AcceptedAt: at}
	for _, d := range a.Decisions {
		out.Decisions = append(out.Decisions, results.AcceptedDecision{ID: d.ID, Route: d.Route})
	}
	return out
}

// withRequestID gives an error answer that carries no request id one:
// platformID (the transport's) when there is one, else a fresh id, in
// the body and in X-Request-Id, so every error a caller reports can be
// found in the logs. An error answer gets X-Request-Id only here, so an
// answer that has it is done: Handle and then Write call this on the same
// answer, and the second call reads nothing.
func withRequestID(r *Response, platformID string) {
	if r == nil || r.Status < 400 || r.Header.Get("X-Request-Id") != "" {
		return
	}
	var body map[string]json.RawMessage
	if json.Unmarshal(r.Body, &body) != nil {
		return
	}
	if raw, ok := body["request_id"]; ok {
		var id string
		_ = json.Unmarshal(raw, &id)
		r.Header.Set("X-Request-Id", id)
		return
	}
	id := platformID
	if id == "" {
		id = requestID("", false)
	}
	body["request_id"], _ = json.Marshal(id)
	if b, err := json.Marshal(body); err == nil {
		r.Body = b
		r.Header.Set("X-Request-Id", id)
	}
}

// resultsCaller is the start every results route shares: the method it
// takes (GET also takes HEAD), the caller by the auth rules, and a
// results store to answer from. A refusal is the answer to return.
func (h *Handler) resultsCaller(req *Request, method string) (Caller, *Response) {
	if req.Method != method && !(method == http.MethodGet && req.Method == http.MethodHead) {
		r := errorResponse(ErrorBody{Code: decision.CodeMethodNotAllowed, Message: "use " + method})
		r.Header.Set("Allow", method)
		return Caller{}, r
	}
	caller, r := h.Authenticate(req)
	if r != nil {
		return caller, r
	}
	if h.cfg.Results == nil {
		return caller, noResultsHere()
	}
	return caller, nil
}
