package decision

import (
	"context"
	"errors"
	"net/http"
)

// Code is a stable, machine-readable reason for an error: the "code" of
// every error body verdict writes and of every error result it publishes.
// Each code has one HTTP status (Status) and one queue action (Action);
// no other place decides either.
type Code string

// The codes. A comment gives each one's HTTP status and queue action.
const (
	// CodeMalformed: the body is not the JSON it claims to be. 400; publish.
	CodeMalformed Code = "malformed"
	// CodeInvalid: valid JSON that breaks a field rule. 422; publish.
	CodeInvalid Code = "invalid"
	// CodeUnsupported: a valid decision this model cannot score (its
	// options cannot all get answer slots). 422; publish.
	CodeUnsupported Code = "unsupported"
	// CodeTooLarge: a size limit was exceeded (body, field, queue message,
	// context window). 413; publish.
	CodeTooLarge Code = "too_large"
	// CodeUnsupportedMediaType: the Content-Type is not JSON. 415; publish.
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	// CodeUnauthorized: a missing or bad API key. 401; publish.
	CodeUnauthorized Code = "unauthorized"
	// CodeForbidden: the policy refused the caller. 403; publish.
	CodeForbidden Code = "forbidden"
	// CodeNotFound: no such route, model or record. 404; publish.
	CodeNotFound Code = "not_found"
	// CodeModelNotFound: a System One request names a model this server
	// does not serve. 404; publish.
	CodeModelNotFound Code = "model_not_found"
	// CodeMethodNotAllowed: the route does not take the method. 405; publish.
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodeConflict: the request does not fit the state of what it names
	// (feedback for a decision that has no result yet). 409; publish.
	CodeConflict Code = "conflict"
	// CodeBusy: the engine's admission queue is full. 503; retry.
	CodeBusy Code = "busy"
	// CodeOverloaded: a server is at capacity (admission full, model
	// loading, too many connections). 503 (529 on System One routes); retry.
	CodeOverloaded Code = "overloaded"
	// CodeUnavailable: a dependency (a remote engine, the queue) failed in
	// a way that may pass. 503; retry.
	CodeUnavailable Code = "unavailable"
	// CodeTimeout: the work did not finish in time. 504; retry.
	CodeTimeout Code = "timeout"
	// CodeClosed: the engine is closing; the work was not done. 503;
	// release at once (another worker takes it).
	CodeClosed Code = "closed"
	// CodeCanceled: the caller went away or the worker is stopping. 499;
	// release at once.
	CodeCanceled Code = "canceled"
	// CodeCalibration: the calibration file is pinned to another model or
	// prompt. 500; publish.
	CodeCalibration Code = "calibration"
	// CodeEngine: scoring failed for another reason. 500; publish.
	CodeEngine Code = "engine"
	// CodeInternal: a bug or an unexpected failure. 500; publish.
	CodeInternal Code = "internal"
)

// StatusClientClosedRequest is the status of CodeCanceled (nginx's 499):
// nobody reads it, but logs and metrics tell it apart.
const StatusClientClosedRequest = 499

// Action is what a queue worker does with a message whose decision failed
// with a code.
type Action int

const (
	// ActionPublish: the failure is the decision's answer (retrying would
	// fail alike): publish the error result and delete the message.
	ActionPublish Action = iota
	// ActionRetry: the failure may pass: release the message with a
	// backoff; the redrive policy dead-letters it if it never does.
	ActionRetry
	// ActionRelease: the work was not attempted to the end because the
	// engine or the worker is stopping: release the message at once.
	ActionRelease
)

func (a Action) String() string {
	switch a {
	case ActionRetry:
		return "retry"
	case ActionRelease:
		return "release"
	}
	return "publish"
}

// Status is the HTTP status of an error with code c. An unknown code is 500.
func (c Code) Status() int {
	switch c {
	case CodeMalformed:
		return http.StatusBadRequest
	case CodeInvalid, CodeUnsupported:
		return http.StatusUnprocessableEntity
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound, CodeModelNotFound:
		return http.StatusNotFound
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case CodeConflict:
		return http.StatusConflict
	case CodeBusy, CodeOverloaded, CodeUnavailable, CodeClosed:
		return http.StatusServiceUnavailable
	case CodeTimeout:
		return http.StatusGatewayTimeout
	case CodeCanceled:
		return StatusClientClosedRequest
	}
	return http.StatusInternalServerError
}

// Action is the queue action for a decision that failed with code c. An
// unknown code is published.
func (c Code) Action() Action {
	switch c {
	case CodeBusy, CodeOverloaded, CodeUnavailable, CodeTimeout:
		return ActionRetry
	case CodeClosed, CodeCanceled:
		return ActionRelease
	}
	return ActionPublish
}

// Retryable reports whether the same work may succeed if tried again later
// (Action is ActionRetry).
func (c Code) Retryable() bool { return c.Action() == ActionRetry }

// Overload reports whether c says "at capacity, come back later": the
// answers that carry Retry-After.
func (c Code) Overload() bool { return c.Status() == http.StatusServiceUnavailable }

// coder is an error that carries its code.
type coder interface{ ErrorCode() Code }

// codedError is a sentinel error with a code.
type codedError struct {
	code Code
	msg  string
}

func (e *codedError) Error() string   { return e.msg }
func (e *codedError) ErrorCode() Code { return e.code }

// NewSentinel returns a sentinel error with text msg that CodeOf classifies
// as c. Packages declare their sentinels with it (var ErrBusy =
// decision.NewSentinel(decision.CodeBusy, "engine: busy")); errors.Is works
// on them as on any sentinel.
func NewSentinel(c Code, msg string) error { return &codedError{code: c, msg: msg} }

// CodeOf classifies err: the code of the first error in its chain that
// carries one (a sentinel from NewSentinel, a *ValidationError, an *Error),
// else CodeCanceled for context.Canceled, CodeTimeout for
// context.DeadlineExceeded, else fallback. It is the one place an error
// becomes a code.
func CodeOf(err error, fallback Code) Code {
	var c coder
	switch {
	case err == nil:
		return ""
	case errors.As(err, &c):
		return c.ErrorCode()
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	}
	return fallback
}

// ErrorFor builds the error of a decision that failed with err: its code
// (CodeOf with fallback), message, field problems and retryability.
func ErrorFor(err error, fallback Code) *Error {
	code := CodeOf(err, fallback)
	e := &Error{Code: code, Message: err.Error(), Retryable: code.Retryable()}
	var ve *ValidationError
	if errors.As(err, &ve) {
		e.Fields = ve.Errors
	}
	return e
}

// ErrorBody is the JSON body of verdict's own API errors: the front door,
// `verdict up`'s routes, and the members `verdict serve` adds to the error
// shapes its wire formats mandate.
type ErrorBody struct {
	// Message says what went wrong, for humans (System One clients read
	// it). Always set.
	Message string `json:"message,omitempty"`
	// Code is the stable reason.
	Code Code `json:"code,omitempty"`
	// Fields lists every field problem with its JSON path (422, 413).
	Fields []FieldError `json:"fields,omitempty"`
	// RequestID is the request id, when one was assigned.
	RequestID string `json:"request_id,omitempty"`
}
