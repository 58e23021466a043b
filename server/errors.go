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

// errorBody is the JSON body of every error answer.
type errorBody struct {
	// Message says what went wrong, for humans.
	Message string `json:"message"`
	// Code is a stable machine-readable reason.
	Code string `json:"code"`
	// Fields lists the field problems of a 422 (and of a 413 caused by a
	// field limit).
	Fields []decision.FieldError `json:"fields,omitempty"`
	// RequestID repeats the x-typesafe-request-id header.
	RequestID string `json:"request_id,omitempty"`
}

// apiError is an error answer waiting to be written.
type apiError struct {
	status     int
	code       string
	message    string
	fields     []decision.FieldError
	retryAfter bool
	allow      string
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
	return e
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
		return newAPIError(http.StatusInternalServerError, "engine", "scoring failed: %v", err)
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
	case "unavailable":
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

// writeError writes e as JSON.
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
	body := errorBody{Message: e.message, Code: e.code, Fields: e.fields}
	if rs != nil {
		body.RequestID = rs.id
		rs.errCode = e.code
	}
	b, _ := json.Marshal(body) // plain strings
	status := e.status
	if status == 499 { // the client is gone; nothing reads this
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
