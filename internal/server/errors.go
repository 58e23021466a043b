package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/verdict-dev/verdict/decision"
)

// errorBody is the JSON body of every error answer. Which members are set
// depends on the route's clients (see writeError): SageMaker routes carry
// "error" (the SemIf adapter contract), System One routes "detail" (the
// hosted service's shape); verdict's own members (decision.ErrorBody:
// message, code, fields, request_id) come in addition.
type errorBody struct {
	// Error is the SemIf adapter contract's message (SageMaker routes).
	Error string `json:"error,omitempty"`
	// Retryable is true on the SageMaker routes' 503 answers.
	Retryable bool `json:"retryable,omitempty"`
	// Detail is the hosted System One service's error object.
	Detail *errorDetail `json:"detail,omitempty"`
	decision.ErrorBody
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
	code       decision.Code
	message    string
	fields     []decision.FieldError
	retryAfter bool // overload: 503 (SageMaker) or 529 (System One), with Retry-After
	allow      string
	// contract is the SemIf adapter contract's wording of the error, used
	// as "error" on the SageMaker routes when set (else message).
	contract string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message) }

// newAPIError is an answer with code and the code's HTTP status.
func newAPIError(code decision.Code, format string, args ...any) *apiError {
	return &apiError{status: code.Status(), code: code, message: fmt.Sprintf(format, args...), retryAfter: code.Overload()}
}

// busyError is the 503 of a full admission queue, a busy engine or a model
// still loading: clients see one code, "overloaded", with Retry-After.
func busyError(format string, args ...any) *apiError {
	e := newAPIError(decision.CodeOverloaded, format, args...)
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

// parseError maps an error of the decision parsers to its answer (400
// malformed, 413 too large, 422 invalid; decision.CodeOf decides).
func parseError(err error) *apiError {
	e := newAPIError(decision.CodeOf(err, decision.CodeInvalid), "%v", err)
	var ve *decision.ValidationError
	if errors.As(err, &ve) && e.code != decision.CodeMalformed {
		e.fields = ve.Errors
	}
	return e
}

// scoreError maps an error of a whole Score call to its answer, by its
// decision.CodeOf.
func scoreError(err error, timeout time.Duration) *apiError {
	switch code := decision.CodeOf(err, decision.CodeEngine); code {
	case decision.CodeBusy:
		return busyError("the engine is busy; retry later")
	case decision.CodeClosed:
		return busyError("the engine is shutting down; retry later")
	case decision.CodeUnavailable:
		return busyError("the engine is unavailable; retry later: %v", err)
	case decision.CodeTimeout:
		return newAPIError(code, "the request did not finish within %v", timeout)
	case decision.CodeCanceled:
		return newAPIError(code, "the request was canceled")
	case decision.CodeEngine:
		e := newAPIError(code, "scoring failed: %v", err)
		e.contract = "scoring failed"
		return e
	default:
		if code.Overload() {
			return busyError("%v", err)
		}
		return newAPIError(code, "scoring failed: %v", err)
	}
}

// resultError maps a per-decision error of a System One question (which
// has no per-answer error shape) to the answer of the whole request: the
// status of its code, overloads as overloaded.
func resultError(key string, e *decision.Error) *apiError {
	if e.Code.Overload() {
		return busyError("question %q: %s", key, e.Message)
	}
	return newAPIError(e.Code, "question %q: %s", key, e.Message)
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
		rs.errCode = string(e.code)
	}
	body := errorBody{ErrorBody: decision.ErrorBody{Message: e.message, Code: e.code, Fields: e.fields}}
	if rs != nil {
		body.RequestID = rs.id
	}
	switch {
	case e.code == decision.CodeNotFound && (rs == nil || rs.route == ""):
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
	b, _ := json.Marshal(body)                        // plain strings
	if status == decision.StatusClientClosedRequest { // the client is gone; nothing reads this
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
