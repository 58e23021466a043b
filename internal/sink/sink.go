package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/verdict-dev/verdict/decision"
)

// Sentinel errors.
var (
	// ErrPermanent marks a publishing failure that retrying cannot fix
	// (a refused webhook address, a 4xx answer). The worker logs and counts
	// it and does not hold the message back for it.
	ErrPermanent = errors.New("sink: permanent failure")
	// ErrConfig: a sink configuration field is invalid.
	ErrConfig = errors.New("sink: invalid configuration")
)

// Record is one decision's published result.
type Record struct {
	// RequestID is the client request the decision belongs to.
	RequestID string `json:"request_id"`
	// DecisionID is the decision's id (its position in the message when
	// the caller gave none).
	DecisionID string `json:"decision_id"`
	// Tenant is the caller's tenant.
	Tenant string `json:"tenant,omitempty"`
	// Format is the request's wire format ("semif" or "systemone").
	Format string `json:"format,omitempty"`
	// Model is the model name the client asked for, echoed.
	Model string `json:"model,omitempty"`
	// SubmittedAt is when the front door accepted the request.
	SubmittedAt time.Time `json:"submitted_at"`
	// Status is the outcome status ("decided", "error", …).
	Status decision.Status `json:"status"`
	// Result is the decision's full result.
	Result decision.Result `json:"result"`
	// Reply lists webhook URLs the request asked results to be posted to
	// (not part of the published bytes).
	Reply []string `json:"-"`
	// Input is the decision as it was scored, set by the worker when the
	// outcome is review so that a results store can show it to a
	// reviewer (not part of the published bytes: states stay out of
	// queues, topics and webhooks).
	Input *decision.Decision `json:"-"`
}

// Key is the idempotency key: request id and decision id.
func (r *Record) Key() string { return r.RequestID + "/" + r.DecisionID }

// Marshal encodes the record. The same record always gives the same bytes.
func (r *Record) Marshal() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("sink: encode %s: %w", r.Key(), err)
	}
	return b, nil
}

// Sink publishes records.
type Sink interface {
	// Name identifies the sink in logs and metrics ("sqs", "sns",
	// "webhook", "store").
	Name() string
	// Publish publishes records (all from one queue message). It returns
	// nil only when every record was accepted; an error wrapping
	// ErrPermanent means retrying will not help.
	Publish(ctx context.Context, recs []Record) error
}
