package worker

import (
	"errors"
	"testing"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/queue"
)

func TestDecideMapsEveryOutcome(t *testing.T) {
	t.Parallel()
	w := &Worker{cfg: Config{RetryBase: DefaultRetryBase, RetryMax: DefaultRetryMax}}
	cases := []struct {
		err    error
		verb   verb
		reason string
	}{
		{nil, verbDelete, "done"},
		{&invalidError{err: queue.ErrBadEnvelope}, verbDelete, "invalid"},
		{errStopping, verbRelease, "shutdown"},
		{&panicError{value: "boom"}, verbRelease, "panic"},
		{&publishError{sink: "sqs", err: queue.ErrClosed}, verbRelease, "publish"},
		{&decision.Error{Code: "busy", Retryable: true}, verbRelease, "retryable"},
		{engine.ErrBusy, verbRelease, "retryable"},
		{errors.New("engine exploded"), verbRelease, "failed"},
		{errDeadline, verbRelease, "deadline"},
		{engine.ErrClosed, verbRelease, "shutdown"},
		// A decision the closing engine left unscored is released, not
		// published as an error result.
		{&decision.Error{Code: decision.CodeClosed, Retryable: true}, verbRelease, "shutdown"},
		{engine.ErrorResult(&decision.Decision{ID: "d"}, engine.ErrClosed).Error, verbRelease, "shutdown"},
	}
	for _, c := range cases {
		a := w.decide(c.err, 1, false)
		if a.verb != c.verb || a.reason != c.reason {
			t.Errorf("decide(%v) = %+v, want verb %d reason %s", c.err, a, c.verb, c.reason)
		}
	}
	if a := w.decide(engine.ErrBusy, 1, true); a.verb != verbRelease || a.delay != 0 || a.reason != "shutdown" {
		t.Errorf("stopping: %+v", a)
	}
	if a := w.decide(nil, 1, true); a.verb != verbDelete {
		t.Errorf("stopping but done: %+v", a)
	}
	if d := w.backoff(1); d != DefaultRetryBase {
		t.Errorf("backoff(1) = %v", d)
	}
	if d := w.backoff(3); d != 4*DefaultRetryBase {
		t.Errorf("backoff(3) = %v", d)
	}
	if d := w.backoff(30); d != DefaultRetryMax {
		t.Errorf("backoff(30) = %v", d)
	}
}
