package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/verdict-dev/verdict/internal/queue"
)

// batchEntry is one message as both AWS batch APIs (SQS SendMessageBatch,
// SNS PublishBatch) take it: a record or an event.
type batchEntry struct {
	id    string            // index of the record or event, unique in the batch
	body  string            // the record's stable JSON, or the event's body
	attrs map[string]string // message attributes (see recordEntries, eventEntries)
	group string            // FIFO: the request id ("" on standard targets)
	dedup string            // FIFO: sha256 of the record or event key
}

// batchFailure is an entry the service refused.
type batchFailure struct{ id, code, message string }

// sendFunc sends one batch of at most queue.MaxBatch entries and returns
// the entries the service refused.
type sendFunc func(ctx context.Context, es []batchEntry) ([]batchFailure, error)

// recordEntries marshals recs into entries with the attributes request_id,
// decision_id and status. A record that does not marshal is a permanent
// error.
func recordEntries(recs []Record, fifo bool) ([]batchEntry, error) {
	entries := make([]batchEntry, len(recs))
	for i := range recs {
		body, err := recs[i].Marshal()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrPermanent, err)
		}
		entries[i] = batchEntry{id: strconv.Itoa(i), body: string(body), attrs: map[string]string{
			"request_id": recs[i].RequestID, "decision_id": recs[i].DecisionID, "status": string(recs[i].Status)}}
		if fifo {
			entries[i].group, entries[i].dedup = recs[i].RequestID, queue.DedupID(recs[i].Key())
		}
	}
	return entries, nil
}

// eventEntries checks evs and turns them into entries with the attributes
// event (the kind), request_id and decision_id: a consumer tells events
// from records by the event attribute. An invalid event is a permanent
// error.
func eventEntries(evs []Event, fifo bool) ([]batchEntry, error) {
	entries := make([]batchEntry, len(evs))
	for i := range evs {
		e := &evs[i]
		if err := e.check(i); err != nil {
			return nil, err
		}
		entries[i] = batchEntry{id: strconv.Itoa(i), body: string(e.Body), attrs: map[string]string{
			"event": e.Kind, "request_id": e.RequestID, "decision_id": e.DecisionID}}
		if fifo {
			entries[i].group, entries[i].dedup = e.RequestID, queue.DedupID(e.Key)
		}
	}
	return entries, nil
}

// publishBatches hands entries to send in batches of queue.MaxBatch,
// stopping at the first batch that fails. The entries the service refused
// are joined into one error naming target.
func publishBatches(ctx context.Context, entries []batchEntry, target string, send sendFunc) error {
	for start := 0; start < len(entries); start += queue.MaxBatch {
		failed, err := send(ctx, entries[start:min(start+queue.MaxBatch, len(entries))])
		if err != nil {
			return fmt.Errorf("sink: %s: %w", target, err)
		}
		var errs []error
		for _, f := range failed {
			errs = append(errs, fmt.Errorf("sink: %s: entry %s: %s: %s", target, f.id, f.code, f.message))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}
