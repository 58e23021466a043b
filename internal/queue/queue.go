package queue

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limits shared by both implementations (they are SQS's).
const (
	// MaxBatch is the most messages one Receive, Send or Delete handles.
	MaxBatch = 10
	// MaxWait is the longest long poll.
	MaxWait = 20 * time.Second
	// MaxVisibility is the longest visibility timeout (12 hours).
	MaxVisibility = 12 * time.Hour
)

// Sentinel errors.
var (
	// ErrClosed: the queue has been closed.
	ErrClosed = errors.New("queue: closed")
	// ErrNoQueue: the queue does not exist (an SQS queue that was deleted
	// or never created). Retrying cannot help.
	ErrNoQueue = errors.New("queue: no such queue")
	// ErrStaleReceipt: a receipt handle no longer names a message this
	// consumer holds (it was deleted, or its visibility expired and it was
	// received again).
	ErrStaleReceipt = errors.New("queue: receipt handle is stale")
	// ErrConfig: a queue configuration field is invalid.
	ErrConfig = errors.New("queue: invalid configuration")
	// ErrInvalid: an argument of a call is out of range (it is refused,
	// not clamped).
	ErrInvalid = errors.New("queue: invalid argument")
)

// Message is one received message.
type Message struct {
	// ID is the queue's id of the message.
	ID string
	// Receipt is the handle for Delete and ChangeVisibility; it is new on
	// every receive.
	Receipt string
	// Body is the message body (an encoded Envelope).
	Body []byte
	// Attributes are the message attributes (string values).
	Attributes map[string]string
	// ReceiveCount counts receives of this message, this one included.
	ReceiveCount int
	// GroupID is the FIFO message group (empty on standard queues).
	GroupID string
	// SentAt is when the message was enqueued.
	SentAt time.Time
}

// ReceiveOptions shape one Receive call.
type ReceiveOptions struct {
	// Max is the most messages to return, 1..10. Defaults to 1. Out of
	// range values (as for the other fields) fail the call with ErrInvalid.
	Max int
	// Wait is the long-poll time: Receive returns as soon as a message is
	// available, or empty-handed after Wait. At most 20 s. Defaults to 0
	// (return at once).
	Wait time.Duration
	// Visibility hides the received messages for this long. Defaults to
	// the queue's own visibility timeout.
	Visibility time.Duration
}

// Visibility is a new visibility timeout for a held message.
type Visibility struct {
	// Receipt of the message.
	Receipt string
	// Timeout from now; 0 makes the message visible at once.
	Timeout time.Duration
}

// Queue is the consumer side of a queue (and its Sender side).
type Queue interface {
	Sender
	// Receive returns up to opts.Max messages, waiting up to opts.Wait for
	// the first one. A cancelled ctx returns no messages and ctx's error.
	Receive(ctx context.Context, opts ReceiveOptions) ([]Message, error)
	// Delete removes held messages by receipt (at most 10), reporting
	// failures per receipt.
	Delete(ctx context.Context, receipts []string) ([]error, error)
	// ChangeVisibility sets new visibility timeouts for held messages (at
	// most 10), reporting failures per entry.
	ChangeVisibility(ctx context.Context, vs []Visibility) ([]error, error)
	// Close releases the queue's resources (not its messages).
	Close() error
}

// check validates the common arguments of a batch call.
func checkBatch(n int) error {
	if n > MaxBatch {
		return errors.New("queue: at most 10 entries per batch call")
	}
	return nil
}

// resolve checks the options as given, refusing what is out of range
// instead of clamping it, and fills the defaults (defVis for Visibility,
// which may stay 0: the queue's own).
func (o ReceiveOptions) resolve(defVis time.Duration) (ReceiveOptions, error) {
	switch {
	case o.Max < 0 || o.Max > MaxBatch:
		return o, fmt.Errorf("%w: ReceiveOptions.Max must be 0..10 (0: 1), got %d", ErrInvalid, o.Max)
	case o.Wait < 0 || o.Wait > MaxWait:
		return o, fmt.Errorf("%w: ReceiveOptions.Wait must be 0..20s, got %v", ErrInvalid, o.Wait)
	case o.Visibility < 0 || o.Visibility > MaxVisibility:
		return o, fmt.Errorf("%w: ReceiveOptions.Visibility must be 0..12h (0: the queue's), got %v", ErrInvalid, o.Visibility)
	}
	if o.Max == 0 {
		o.Max = 1
	}
	if o.Visibility == 0 {
		o.Visibility = defVis
	}
	return o, nil
}
