package engine

import (
	"context"
	"errors"

	"github.com/verdict-dev/verdict/decision"
)

// Scorer scores decisions. It returns exactly one result per decision, in
// the same order. A failure that concerns one decision is reported in that
// result's Error; the returned error is for failures of the whole call
// (ErrBusy, ErrClosed, a cancelled context).
type Scorer interface {
	Score(ctx context.Context, ds []decision.Decision) ([]decision.Result, error)
}

// Sentinel errors shared by every runtime.
var (
	// ErrBusy: the admission queue is full; try again later (HTTP 503 with
	// Retry-After; queue workers release the message with a delay).
	ErrBusy = errors.New("engine: busy")
	// ErrClosed: the scorer has been closed.
	ErrClosed = errors.New("engine: closed")
	// ErrNoEngine: this binary was built without llama.cpp (build with
	// `make build`, which sets the llamacpp tag and the include paths).
	ErrNoEngine = errors.New("engine: built without llama.cpp (rebuild with `make build`: -tags llamacpp)")
	// ErrUnsupported: the decision cannot be scored by this model, e.g. its
	// options cannot all be given answer slots.
	ErrUnsupported = errors.New("engine: unsupported decision")
	// ErrContextFull: the prompt does not fit the context window.
	ErrContextFull = errors.New("engine: prompt does not fit the context")
	// ErrUnavailable: a remote engine failed in a way that may pass
	// (retries exhausted on 503/429/5xx/connection errors).
	ErrUnavailable = errors.New("engine: unavailable")
)

// Retryable reports whether err may succeed if the same work is tried
// again later.
func Retryable(err error) bool {
	return errors.Is(err, ErrBusy) || errors.Is(err, ErrUnavailable) ||
		errors.Is(err, context.DeadlineExceeded)
}

// CodeClosed is the Result.Error code of a decision left unscored because
// the scorer was closed (ErrClosed): retryable elsewhere or later. A queue
// worker releases such a message instead of publishing the error.
const CodeClosed = "closed"

// ErrorResult builds the result for a decision that could not be scored.
func ErrorResult(d *decision.Decision, err error) decision.Result {
	code := "engine"
	retryable := Retryable(err)
	switch {
	case errors.Is(err, ErrClosed):
		code, retryable = CodeClosed, true
	case errors.Is(err, ErrBusy):
		code = "busy"
	case errors.Is(err, ErrUnsupported):
		code = "unsupported"
	case errors.Is(err, ErrContextFull):
		code = "too_large"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = "canceled"
	case errors.Is(err, ErrUnavailable):
		code = "unavailable"
	}
	return decision.Result{
		ID: d.ID, Kind: d.Kind, OptionIDs: d.OptionIDs(),
		Error: &decision.Error{Code: code, Message: err.Error(), Retryable: retryable},
	}
}
