package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/verdict-dev/verdict/decision"
)

// EnvelopeVersion is the version of the message envelope this build writes.
// Readers accept this version only and answer others with an error result.
const EnvelopeVersion = 1

// MaxMessageBytes is SQS's limit for one message body (1 MiB).
const MaxMessageBytes = 1 << 20

// ErrTooLarge: an envelope does not fit in one queue message
// (decision.CodeTooLarge).
var ErrTooLarge = decision.NewSentinel(decision.CodeTooLarge, "queue: message larger than 1 MiB")

// ErrBadEnvelope: a message body is not a valid envelope.
var ErrBadEnvelope = errors.New("queue: invalid envelope")

// Result formats: how a request's results are rendered for its reply
// targets.
const (
	FormatSemIf     = "semif"
	FormatSystemOne = "systemone"
)

// Envelope is the body of one queue message: decisions that share one state,
// with routing metadata.
type Envelope struct {
	// Version is EnvelopeVersion.
	Version int `json:"v"`
	// RequestID identifies the client request; results are keyed by
	// RequestID + decision id.
	RequestID string `json:"request_id"`
	// Tenant is the authenticated caller's tenant (set by the front door,
	// never taken from the request body).
	Tenant string `json:"tenant,omitempty"`
	// SubmittedAt is when the front door accepted the request.
	SubmittedAt time.Time `json:"submitted_at"`
	// Route is the pool the message was sent to.
	Route decision.Route `json:"route"`
	// GroupKey is the sha256 of the shared state (router.GroupKey).
	GroupKey string `json:"group_key"`
	// Format says how results are rendered for reply targets.
	Format string `json:"format"`
	// Model is the model the client asked for (System One), echoed.
	Model string `json:"model,omitempty"`
	// Decisions share one state.
	Decisions []decision.Decision `json:"decisions"`
	// Reply lists extra places to publish results to (webhooks).
	Reply []ReplyTarget `json:"reply,omitempty"`
	// APIKeySHA256 is the hex sha256 of the API key the front door
	// accepted (never the key), so that the worker's policy can authorize
	// by key as the front door did.
	APIKeySHA256 string `json:"api_key_sha256,omitempty"`
	// Metadata is caller metadata for policy rules.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Cascade is set by a worker that sent decisions on to another pool (a
	// policy's escalate clause): one list per decision, in order, of the
	// stages each was scored on before this message, oldest first. Every
	// list names the same pools; the message's Route is not among them.
	Cascade [][]decision.CascadeStage `json:"cascade,omitempty"`
}

// Visited returns the pools the message's decisions were scored on before
// (from Cascade), oldest first. The envelope has been checked.
func (e *Envelope) Visited() []decision.Route {
	if len(e.Cascade) == 0 {
		return nil
	}
	out := make([]decision.Route, len(e.Cascade[0]))
	for i, s := range e.Cascade[0] {
		out[i] = s.Pool
	}
	return out
}

// ReplyTarget is one place to publish a request's results.
type ReplyTarget struct {
	// Kind is "webhook".
	Kind string `json:"kind"`
	// URL of the webhook.
	URL string `json:"url"`
}

// Marshal encodes the envelope, refusing one over MaxMessageBytes.
func (e *Envelope) Marshal() ([]byte, error) {
	if e.Version == 0 {
		e.Version = EnvelopeVersion
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("queue: encode envelope %s: %w", e.RequestID, err)
	}
	if len(b) > MaxMessageBytes {
		return nil, fmt.Errorf("%w: request %s is %d bytes", ErrTooLarge, e.RequestID, len(b))
	}
	return b, nil
}

// UnmarshalEnvelope decodes and checks a message body.
func UnmarshalEnvelope(b []byte) (*Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadEnvelope, err)
	}
	switch {
	case e.Version != EnvelopeVersion:
		return nil, fmt.Errorf("%w: version %d, want %d", ErrBadEnvelope, e.Version, EnvelopeVersion)
	case e.RequestID == "":
		return nil, fmt.Errorf("%w: request_id is required", ErrBadEnvelope)
	case len(e.Decisions) == 0:
		return nil, fmt.Errorf("%w: request %s: decisions is empty", ErrBadEnvelope, e.RequestID)
	}
	for i := range e.Decisions {
		if err := e.Decisions[i].Validate(decision.StructuralLimits(), fmt.Sprintf("decisions[%d]", i)); err != nil {
			return &e, fmt.Errorf("%w: request %s: %w", ErrBadEnvelope, e.RequestID, err)
		}
	}
	if err := decision.CheckCascade(e.Cascade, len(e.Decisions), e.Route, "cascade"); err != nil {
		return &e, fmt.Errorf("%w: request %s: %w", ErrBadEnvelope, e.RequestID, err)
	}
	return &e, nil
}

// Outgoing is one message to send.
type Outgoing struct {
	// Body is the encoded Envelope.
	Body []byte
	// GroupID is the FIFO MessageGroupId (the envelope's group key);
	// ignored by standard queues.
	GroupID string
	// DedupID is the FIFO MessageDeduplicationId; ignored by standard
	// queues (the local queue honours it for its dedup window too).
	DedupID string
	// Attributes become message attributes (string values).
	Attributes map[string]string
}

// Sender is the enqueue side of a queue: what the front door needs.
type Sender interface {
	// Send enqueues msgs (at most 10 per call, as SQS batches) and reports
	// failures per message: the returned slice has one entry per message,
	// nil for success. A non-nil error means the whole call failed.
	Send(ctx context.Context, msgs []Outgoing) ([]error, error)
}
