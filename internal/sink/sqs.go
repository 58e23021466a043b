package sink

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQS publishes one message per record, and one per event, on a results
// queue.
type SQS struct {
	client *sqs.Client
	url    string
	fifo   bool
}

var (
	_ Sink      = (*SQS)(nil)
	_ EventSink = (*SQS)(nil)
)

// NewSQS publishes to the queue at url with client (see
// queue.NewSQSClient).
func NewSQS(client *sqs.Client, url string) (*SQS, error) {
	if client == nil || url == "" {
		return nil, fmt.Errorf("%w: SQS results sink needs a client and a queue URL", ErrConfig)
	}
	return &SQS{client: client, url: url, fifo: strings.HasSuffix(url, ".fifo")}, nil
}

// Name is "sqs".
func (s *SQS) Name() string { return "sqs" }

// Publish sends the records in batches of 10, with the message
// attributes request_id, decision_id and status. On FIFO queues the group
// is the request id and the deduplication id the sha256 of the key.
func (s *SQS) Publish(ctx context.Context, recs []Record) error {
	entries, err := recordEntries(recs, s.fifo)
	if err != nil {
		return err
	}
	return publishBatches(ctx, entries, "sqs "+s.url, s.send)
}

// PublishEvents sends one message per event, body the event's body, in
// batches of 10, with the message attributes event (the kind), request_id
// and decision_id. On FIFO queues the group is the request id and the
// deduplication id the sha256 of the event's key.
func (s *SQS) PublishEvents(ctx context.Context, evs []Event) error {
	entries, err := eventEntries(evs, s.fifo)
	if err != nil {
		return err
	}
	return publishBatches(ctx, entries, "sqs "+s.url, s.send)
}

// send is SendMessageBatch for publishBatches.
func (s *SQS) send(ctx context.Context, es []batchEntry) ([]batchFailure, error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(es))
	for i, e := range es {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(e.id), MessageBody: aws.String(e.body),
			MessageAttributes: map[string]types.MessageAttributeValue{}}
		for k, v := range e.attrs {
			entries[i].MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
		if e.group != "" {
			entries[i].MessageGroupId, entries[i].MessageDeduplicationId = aws.String(e.group), aws.String(e.dedup)
		}
	}
	out, err := s.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(s.url), Entries: entries})
	if err != nil {
		return nil, err
	}
	failed := make([]batchFailure, len(out.Failed))
	for i, f := range out.Failed {
		failed[i] = batchFailure{aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)}
	}
	return failed, nil
}
