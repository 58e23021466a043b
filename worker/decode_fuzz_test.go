package worker

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/queue"
)

// FuzzDecodeMessage: any body decodes to a valid envelope or to error
// records that can be published; never a panic, never a message that
// vanishes without an answer.
func FuzzDecodeMessage(f *testing.F) {
	good := queue.Envelope{Version: 1, RequestID: "r", Format: queue.FormatSemIf, Decisions: []decision.Decision{{
		ID: "d", State: decision.TextState("s"), Question: "q?", Options: []decision.Option{{ID: "a"}, {ID: "b"}}}}}
	b, _ := good.Marshal()
	f.Add(b)
	f.Add([]byte(`{"v":1,"request_id":"r","decisions":[{"id":"d","state":{"k":[1,2]},"question":"q","options":[{"id":"a"},{"id":"a"}]}]}`))
	f.Add([]byte(`{"v":2,"request_id":"r","decisions":[]}`))
	f.Add([]byte(`{"v":1,"request_id":"","decisions":null}`))
	f.Add([]byte(`{"v":1,"request_id":"r","decisions":[{"state":"","question":"","options":[]}]}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(``))
	f.Add([]byte(`{"v":1,"request_id":"r","decisions":[{"state":42}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		env, recs, err := decodeMessage(queue.Message{ID: "m1", Body: body})
		if err == nil {
			if env == nil || env.RequestID == "" || len(env.Decisions) == 0 {
				t.Fatalf("accepted an envelope without request id or decisions: %q", body)
			}
			if len(recs) != 0 {
				t.Fatal("records for a valid message")
			}
			return
		}
		if len(recs) == 0 {
			t.Fatalf("invalid message %q got no error record", body)
		}
		for _, r := range recs {
			if r.RequestID == "" || r.DecisionID == "" || r.Status != decision.StatusError || r.Result.Error == nil {
				t.Fatalf("bad error record %+v", r)
			}
			out, err := r.Marshal()
			if err != nil {
				t.Fatalf("error record does not encode: %v", err)
			}
			if !json.Valid(out) {
				t.Fatal("invalid JSON")
			}
		}
	})
}

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

// A fresh worker takes one message: it has no timing to tell what fits in
// the visibility timeout, and it publishes nothing until its first batch is
// scored. Timings then let it take more, as many as finish within half the
// visibility timeout; a redelivered message makes it cautious again.
func TestReceiveMaxStartsSmallAndFitsVisibility(t *testing.T) {
	t.Parallel()
	w := &Worker{cfg: Config{MaxMessages: 10, Visibility: 60 * time.Second}}
	if n := w.receiveMax(); n != 1 {
		t.Fatalf("before any measurement: %d, want 1", n)
	}
	w.observe(10*time.Millisecond, 1, false)
	if n := w.receiveMax(); n != 10 {
		t.Fatalf("after a quick message: %d, want 10", n)
	}
	// 4 messages took 40 s: 10 s each, so only 3 fit in half of 60 s.
	w.perMsg = 0
	w.observe(40*time.Second, 4, false)
	if n := w.receiveMax(); n != 3 {
		t.Fatalf("after slow batch: %d, want 3", n)
	}
	// Very slow: still one at a time, never zero.
	w.perMsg = 10 * time.Minute
	if n := w.receiveMax(); n != 1 {
		t.Fatalf("very slow: %d, want 1", n)
	}
	// A redelivered message: one at a time until a receive without one.
	w.perMsg = time.Millisecond
	w.noteReceived([]queue.Message{{ReceiveCount: 1}, {ReceiveCount: 2}})
	if n := w.receiveMax(); n != 1 {
		t.Fatalf("after a redelivered message: %d, want 1", n)
	}
	w.observe(time.Millisecond, 1, true)
	if n := w.receiveMax(); n != 1 {
		t.Fatalf("still redelivered: %d, want 1", n)
	}
	w.observe(time.Millisecond, 1, false)
	if n := w.receiveMax(); n != 10 {
		t.Fatalf("after a fresh receive: %d, want 10", n)
	}
}
