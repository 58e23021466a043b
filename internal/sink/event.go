package sink

import (
	"context"
	"encoding/json"
	"fmt"
)

// Event is something other than a decision's result that the sinks
// publish: today a feedback answer (Kind "feedback"), so that a ticketing
// system can both send answers and receive everyone's. Its body is the
// event's JSON; Key identifies it for deduplication (FIFO targets) and in
// logs.
type Event struct {
	// Kind names the event: the "event" message attribute on SQS and SNS,
	// the X-Verdict-Event header of a webhook.
	Kind string
	// RequestID and DecisionID name the decision it is about (message
	// attributes request_id and decision_id; the FIFO group is the
	// request id).
	RequestID, DecisionID string
	// Key is unique per event. On FIFO queues and topics its sha256 is the
	// deduplication id, as a record's key is, so it must not equal a
	// record's key (request id/decision id); webhooks carry it in
	// X-Verdict-Idempotency-Key.
	Key string
	// Body is the event's JSON.
	Body []byte
}

// EventSink publishes events. The SQS, SNS and webhook sinks are
// EventSinks; the results stores are not (they keep feedback themselves).
type EventSink interface {
	// Name identifies the sink in logs and metrics.
	Name() string
	// PublishEvents publishes every event or returns an error; an error
	// wrapping ErrPermanent means retrying will not help.
	PublishEvents(ctx context.Context, evs []Event) error
}

// check reports the first field of the i-th event that no sink can
// publish (an empty one, a body that is not JSON) as a permanent error:
// SQS and SNS refuse empty attribute values and bodies, and a FIFO target
// needs the request id for the group.
func (e *Event) check(i int) error {
	for _, f := range []struct{ name, value string }{
		{"kind", e.Kind}, {"request_id", e.RequestID}, {"decision_id", e.DecisionID}, {"key", e.Key},
	} {
		if f.value == "" {
			return fmt.Errorf("%w: event[%d].%s: empty", ErrPermanent, i, f.name)
		}
	}
	if !json.Valid(e.Body) {
		return fmt.Errorf("%w: event[%d].body: not JSON", ErrPermanent, i)
	}
	return nil
}
