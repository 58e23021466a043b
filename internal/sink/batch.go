package sink

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/verdict-dev/verdict/internal/queue"
)

// batchEntry is one record as both AWS batch APIs (SQS SendMessageBatch,
// SNS PublishBatch) take it.
type batchEntry struct {
	id    string            // index of the record, unique in the batch
	body  string            // the record's stable JSON
	attrs map[string]string // request_id, decision_id, status
	group string            // FIFO: the request id ("" on standard targets)
	dedup string            // FIFO: sha256 of the record key
}

// batchFailure is an entry the service refused.
type batchFailure struct{ id, code, message string }

// publishBatches marshals recs and hands them to send in batches of
// queue.MaxBatch. A record that does not marshal is a permanent error; the
// entries the service refused are joined into one error naming target.
func publishBatches(recs []Record, fifo bool, target string, send func([]batchEntry) ([]batchFailure, error)) error {
	for start := 0; start < len(recs); start += queue.MaxBatch {
		end := min(start+queue.MaxBatch, len(recs))
		entries := make([]batchEntry, 0, end-start)
		for i := start; i < end; i++ {
			body, err := recs[i].Marshal()
			if err != nil {
				return fmt.Errorf("%w: %w", ErrPermanent, err)
			}
			e := batchEntry{id: strconv.Itoa(i), body: string(body), attrs: attributes(&recs[i])}
			if fifo {
				e.group, e.dedup = recs[i].RequestID, queue.DedupID(recs[i].Key())
			}
			entries = append(entries, e)
		}
		failed, err := send(entries)
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

func attributes(r *Record) map[string]string {
	return map[string]string{"request_id": r.RequestID, "decision_id": r.DecisionID, "status": string(r.Status)}
}
