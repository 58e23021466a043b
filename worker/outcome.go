package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/sink"
)

// Processing outcomes other than success are error values; decide reads
// them and nothing else chooses a queue action.

// invalidError: the message is not a valid envelope. Error results have
// been published for it.
type invalidError struct{ err error }

func (e *invalidError) Error() string { return "invalid message: " + e.err.Error() }
func (e *invalidError) Unwrap() error { return e.err }

// panicError: processing panicked; the panic was recovered.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// publishError: a sink failed in a way that may pass.
type publishError struct {
	sink string
	err  error
}

func (e *publishError) Error() string { return "publish to " + e.sink + ": " + e.err.Error() }
func (e *publishError) Unwrap() error { return e.err }

// errStopping: a stop abandoned the message's work, or a receive cut
// short by a stop returned it; the message was not finished (see stop.go).
var errStopping = errors.New("worker: stopping")

// errDeadline: the message's deadline (Config.MessageTimeout) passed
// before its work was done; what was still running was abandoned.
var errDeadline = errors.New("worker: message deadline passed")

// closedResult reports whether a per-decision error says the scorer was
// closed before it scored the decision.
func closedResult(e *decision.Error) bool { return e != nil && e.Code == decision.CodeClosed }

// verb is what happens to a message.
type verb int

const (
	verbDelete verb = iota
	verbRelease
)

// action is a queue action for one message.
type action struct {
	verb   verb
	delay  time.Duration // for verbRelease: the new visibility timeout
	reason string        // metric label and log field
}

// decide maps a message's processing outcome to its queue action. It is
// the only place that makes this choice. stopping says a stop has
// abandoned the work in flight: whatever did not succeed is released at
// once.
func (w *Worker) decide(err error, receiveCount int, stopping bool) action {
	var (
		inv *invalidError
		pan *panicError
		pub *publishError
		res *decision.Error
	)
	switch {
	case err == nil:
		return action{verb: verbDelete, reason: "done"}
	case errors.As(err, &inv):
		return action{verb: verbDelete, reason: "invalid"}
	case stopping, errors.Is(err, errStopping), errors.Is(err, context.Canceled), errors.Is(err, engine.ErrClosed),
		errors.As(err, &res) && closedResult(res):
		return action{verb: verbRelease, reason: "shutdown"}
	case errors.Is(err, errDeadline):
		return action{verb: verbRelease, delay: w.backoff(receiveCount), reason: "deadline"}
	case errors.As(err, &pan):
		return action{verb: verbRelease, delay: w.backoff(receiveCount), reason: "panic"}
	case errors.As(err, &pub):
		return action{verb: verbRelease, delay: w.backoff(receiveCount), reason: "publish"}
	case engine.Retryable(err), errors.As(err, &res) && res.Retryable:
		return action{verb: verbRelease, delay: w.backoff(receiveCount), reason: "retryable"}
	default:
		// Left for the redrive policy: it comes back after the delay and
		// reaches the dead-letter queue after maxReceiveCount receives.
		return action{verb: verbRelease, delay: w.backoff(receiveCount), reason: "failed"}
	}
}

// backoff is the release delay after the n-th receive: RetryBase·2^(n−1),
// at most RetryMax.
func (w *Worker) backoff(n int) time.Duration {
	d := w.cfg.RetryBase
	for i := 1; i < n && d > 0 && d < w.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, w.cfg.RetryMax)
}

// permanent reports whether a sink error will not pass by retrying.
func permanent(err error) bool { return errors.Is(err, sink.ErrPermanent) }
