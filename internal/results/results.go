// Package results is where an asynchronous caller finds what became of
// its request. The front door records each request it accepted (Accept),
// the worker stores each decision's result record (Publish, a sink), and
// Lookup answers GET /v1/requests/{id} and GET /v1/decisions/{id} from
// the two, showing a caller only its own tenant's requests.
//
// Two stores implement Store: Local, SQLite files beside `verdict up`'s
// queue, and Dynamo, one DynamoDB table on AWS. Both keep the first copy
// of a record: a redelivered message stores the same record again and
// never a different one. Lookup is written once, over the interface, so
// both answer with the same statuses and bodies.
package results

import (
	"context"
	"errors"
	"time"

	"github.com/verdict-dev/verdict/internal/sink"
)

// ErrUnavailable wraps a failure of the store itself (the table is
// missing, access is denied, the service is down): the front door answers
// 503 with Retry-After, never 500.
var ErrUnavailable = errors.New("results: store unavailable")

// Accepted is a request the front door accepted and enqueued.
type Accepted struct {
	// RequestID is the request's id.
	RequestID string
	// Tenant is the caller's tenant; only its callers see the request.
	Tenant string
	// Model is the model name the request asked for, echoed.
	Model string
	// AcceptedAt is when the front door accepted it.
	AcceptedAt time.Time
	// Decisions are its decisions in request order.
	Decisions []AcceptedDecision
}

// AcceptedDecision is one decision of an accepted request.
type AcceptedDecision struct {
	// ID is the decision's id.
	ID string
	// Route is the pool it was sent to.
	Route string
}

// Entry is what a store holds for one request id.
type Entry struct {
	// Accepted is the request as the front door recorded it; nil when the
	// front door did not record it (its messages reached the queue some
	// other way) or its record has expired.
	Accepted *Accepted
	// Records are the stored result records, oldest first.
	Records []Stored
}

// Store is the results store the front door and the worker share.
type Store interface {
	// Sink stores result records (Name, Publish); Publish keeps the
	// first copy of each request id + decision id.
	sink.Sink
	// Accept records an accepted request. Recording the same request
	// again changes nothing.
	Accept(ctx context.Context, a Accepted) error
	// Request returns what the store holds for requestID (an empty Entry
	// when nothing).
	Request(ctx context.Context, requestID string) (Entry, error)
	// RequestsOf lists the ids of tenant's requests that hold a decision
	// with this id, oldest first, each once.
	RequestsOf(ctx context.Context, tenant, decisionID string) ([]string, error)
	// Label records fb (checked by GiveFeedback) unless it repeats the
	// decision's current label, and closes its review. It returns the
	// decision's answers, oldest first, and whether fb was a replay.
	Label(ctx context.Context, fb Feedback) (history []Feedback, replay bool, err error)
	// Labels returns a decision's answers, oldest first.
	Labels(ctx context.Context, requestID, decisionID string) ([]Feedback, error)
	// Reviews lists tenant's open reviews (outcome review, no answer
	// yet), oldest first, at most limit, after cursor ("" for the first
	// page); next is "" after the last page.
	Reviews(ctx context.Context, tenant, cursor string, limit int) (page []Review, next string, err error)
	// EachLabeled calls fn with each labeled decision f picks and its
	// current label.
	EachLabeled(ctx context.Context, f LabelFilter, fn func(Labeled) error) error
	// Close releases the store.
	Close() error
}
