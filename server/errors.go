package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
)

// errorBody is the JSON body of every error answer. Which members are set
// depends on the route's clients (see writeError): SageMaker routes carry
// "error" (the SemIf adapter contract), System One routes "detail" (the
// hosted service's shape); verdict's own members (message, code, fields,
// request_id) come in addition.
type errorBody struct {
	// Error is the SemIf adapter contract's message (SageMaker routes).
	Error string `json:"error,omitempty"`
	// Retryable is true on the SageMaker routes' 503 answers.
	Retryable bool `json:"retryable,omitempty"`
	// Detail is the hosted System One service's error object.
	Detail *errorDetail `json:"detail,omitempty"`
	// Message says what went wrong, for humans.
	Message string `json:"message,omitempty"`
	// Code is a stable machine-readable reason.
	Code string `json:"code,omitempty"`
	// Fields lists the field problems of a 422 (and of a 413 caused by a
	// field limit).
	Fields []decision.FieldError `json:"fields,omitempty"`
	// RequestID repeats the x-typesafe-request-id header.
	RequestID string `json:"request_id,omitempty"`
}

// errorDetail is the "detail" object of a System One error: clients read
// error_type as the label.
type errorDetail struct {
	ErrorType string                `json:"error_type"`
	Message   string                `json:"message"`
	Fields    []decision.FieldError `json:"fields,omitempty"`
}

// apiError is an error answer waiting to be written.
type apiError struct {
	status     int
	code       string
	message    string
	fields     []decision.FieldError
	retryAfter bool // overload: 503 (SageMaker) or 529 (System One), with Retry-After
	allow      string
	// contract is the SemIf adapter contract's wording of the error, used
	// as "error" on the SageMaker routes when set (else message).
	contract string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message) }

func newAPIError(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// busyError is the 503 of a full admission queue, a busy engine or a model
// still loading.
func busyError(format string, args ...any) *apiError {
	e := newAPIError(http.StatusServiceUnavailable, "overloaded", format, args...)
	e.retryAfter = true
	e.contract = busyContract
	return e
}

// loadingError is the 503 while the model loads.
func loadingError() *apiError {
	e := busyError("the model is loading")
	e.contract = "model is loading; retry the request"
	return e
}

// Wording of the SemIf adapter contract.
const (
	busyContract     = "model is busy; retry the request"
	notFoundContract = "not found"
)

// StatusOverloaded is the hosted System One service's "overloaded" status,
// which its clients retry (they do not retry 503 alike).
const StatusOverloaded = 529

// Route families: whose clients a route answers, which decides the shape
// of its error bodies and its overload status.
const (
	familyOther = iota
	familySageMaker
	familySystemOne
)

func (rs *reqState) family() int {
	switch rs.route {
	case "ping", "invocations", "endpoint_invocations":
		return familySageMaker
	case "systemone", "models":
		return familySystemOne
	}
	return familyOther
}

// systemOneErrorType is the hosted service's error_type of a status.
func systemOneErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case StatusOverloaded, http.StatusServiceUnavailable:
		return "overloaded_error"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "timeout_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// parseError maps an error of the decision parsers to its answer: 400
// malformed, 413 too large, 422 invalid.
func parseError(err error) *apiError {
	var ve *decision.ValidationError
	errors.As(err, &ve)
	var fields []decision.FieldError
	if ve != nil {
		fields = ve.Errors
	}
	switch {
	case errors.Is(err, decision.ErrMalformed):
		return newAPIError(http.StatusBadRequest, "malformed", "%v", err)
	case errors.Is(err, decision.ErrTooLarge):
		e := newAPIError(http.StatusRequestEntityTooLarge, "too_large", "%v", err)
		e.fields = fields
		return e
	default:
		e := newAPIError(http.StatusUnprocessableEntity, "invalid", "%v", err)
		e.fields = fields
		return e
	}
}

// scoreError maps an error of a whole Score call to its answer.
func scoreError(err error, timeout time.Duration) *apiError {
	switch {
	case errors.Is(err, engine.ErrBusy):
		return busyError("the engine is busy; retry later")
	case errors.Is(err, engine.ErrClosed):
		return busyError("the engine is shutting down; retry later")
	case errors.Is(err, engine.ErrUnavailable):
		return busyError("the engine is unavailable; retry later: %v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return newAPIError(http.StatusGatewayTimeout, "timeout", "the request did not finish within %v", timeout)
	case errors.Is(err, context.Canceled):
		return newAPIError(499, "canceled", "the request was canceled")
	default:
		e := newAPIError(http.StatusInternalServerError, "engine", "scoring failed: %v", err)
		e.contract = "scoring failed"
		return e
	}
}

// resultError maps a per-decision error of a System One question (which
// has no per-answer error shape) to the answer of the whole request.
func resultError(key string, e *decision.Error) *apiError {
	switch e.Code {
	case "busy":
		return busyError("question %q: %s", key, e.Message)
	case "too_large":
		return newAPIError(http.StatusRequestEntityTooLarge, "too_large", "question %q: %s", key, e.Message)
	case "unsupported", "invalid":
		return newAPIError(http.StatusUnprocessableEntity, e.Code, "question %q: %s", key, e.Message)
	case "unavailable", engine.CodeClosed:
		return busyError("question %q: %s", key, e.Message)
	default:
		return newAPIError(http.StatusInternalServerError, e.Code, "question %q: %s", key, e.Message)
	}
}

// amznErrorType is the SageMaker runtime error type of a status, sent as
// X-Amzn-ErrorType on the /endpoints/{name}/invocations route so that AWS
// SDKs surface typed errors.
func amznErrorType(status int) string {
	switch {
	case status == http.StatusServiceUnavailable:
		return "ServiceUnavailable"
	case status >= 500:
		return "InternalFailure"
	default:
		return "ValidationError"
	}
}

// writeError writes e as JSON, in the shape the route's clients read:
//
//   - SageMaker routes (/ping, /invocations, /endpoints/{name}/invocations):
//     {"error": …} as the SemIf adapter contract has it; overload is 503
//     with exactly {"error":"model is busy; retry the request","retryable":true};
//   - System One routes (/v1/systemone, /v1/models): {"detail":
//     {"error_type", "message"}} as the hosted service has it; overload is
//     529 with Retry-After;
//   - an unknown path: exactly {"error":"not found"}.
//
// verdict's message, code, field paths and request id come in addition,
// except in the two exact bodies.
func (s *Server) writeError(w http.ResponseWriter, rs *reqState, e *apiError) {
	h := w.Header()
	if e.retryAfter {
		h.Set("Retry-After", strconv.Itoa(s.retryAfterSeconds()))
	}
	if e.allow != "" {
		h.Set("Allow", e.allow)
	}
	if rs != nil && rs.sagemakerRuntime {
		h.Set("X-Amzn-ErrorType", amznErrorType(e.status))
	}
	status := e.status
	family := familyOther
	if rs != nil {
		family = rs.family()
		rs.errCode = e.code
	}
	body := errorBody{Message: e.message, Code: e.code, Fields: e.fields}
	if rs != nil {
		body.RequestID = rs.id
	}
	switch {
	case e.code == "not_found" && (rs == nil || rs.route == ""):
		body = errorBody{Error: notFoundContract}
	case family == familySageMaker && e.retryAfter:
		body = errorBody{Error: e.contract, Retryable: true}
	case family == familySageMaker:
		body.Error = e.message
		if e.contract != "" {
			body.Error = e.contract
		}
	case family == familySystemOne:
		if e.retryAfter {
			status = StatusOverloaded
		}
		body.Detail = &errorDetail{ErrorType: systemOneErrorType(status), Message: e.message, Fields: e.fields}
	}
	b, _ := json.Marshal(body) // plain strings
	if status == 499 {         // the client is gone; nothing reads this
		status = http.StatusBadRequest
	}
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n"))
}

func (s *Server) retryAfterSeconds() int {
	sec := int((s.cfg.RetryAfter + time.Second - 1) / time.Second)
	return max(sec, 1)
}
