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

// Sentinel errors shared by every runtime. Each carries its decision.Code,
// so decision.CodeOf classifies it (HTTP status, queue action).
var (
	// ErrBusy: the admission queue is full; try again later (CodeBusy: HTTP
	// 503 with Retry-After; queue workers release the message with a delay).
	ErrBusy = decision.NewSentinel(decision.CodeBusy, "engine: busy")
	// ErrClosed: the scorer has been closed (CodeClosed: queue workers
	// release the message at once).
	ErrClosed = decision.NewSentinel(decision.CodeClosed, "engine: closed")
	// ErrNoEngine: this binary was built without cgo, so it links no
	// llama.cpp.
	ErrNoEngine = errors.New("engine: this verdict was built without cgo, so without llama.cpp: build it with `make build` (or `make llama-lib`, then go build with CGO_ENABLED=1)")
	// ErrUnsupported: the decision cannot be scored by this model, e.g. its
	// options cannot all be given answer slots (CodeUnsupported).
	ErrUnsupported = decision.NewSentinel(decision.CodeUnsupported, "engine: unsupported decision")
	// ErrContextFull: the prompt does not fit the context window
	// (CodeTooLarge).
	ErrContextFull = decision.NewSentinel(decision.CodeTooLarge, "engine: the prompt does not fit the model's "+decision.PhraseContextWindow)
	// ErrUnavailable: a remote engine failed in a way that may pass
	// (retries exhausted on 503/429/5xx/connection errors; CodeUnavailable).
	ErrUnavailable = decision.NewSentinel(decision.CodeUnavailable, "engine: unavailable")
)

// Retryable reports whether err may succeed if the same work is tried
// again later: its code's action is decision.ActionRetry.
func Retryable(err error) bool {
	return decision.CodeOf(err, decision.CodeEngine).Retryable()
}

// ErrorResult builds the result for a decision that could not be scored;
// its code is decision.CodeOf(err), CodeEngine when err carries none.
func ErrorResult(d *decision.Decision, err error) decision.Result {
	return decision.Result{
		ID: d.ID, Kind: d.Kind, OptionIDs: d.OptionIDs(),
		Error: decision.ErrorFor(err, decision.CodeEngine),
	}
}
