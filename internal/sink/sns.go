package sink

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
)

// SNS publishes one notification per record, and one per event, on a
// topic.
type SNS struct {
	client *sns.Client
	topic  string
	fifo   bool
}

var (
	_ Sink      = (*SNS)(nil)
	_ EventSink = (*SNS)(nil)
)

// NewSNSClient builds an SNS client, pointed at endpoint when it is set.
func NewSNSClient(ac aws.Config, endpoint string) *sns.Client {
	return sns.NewFromConfig(ac, func(o *sns.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}

// NewSNS publishes to the topic ARN with client.
func NewSNS(client *sns.Client, topicARN string) (*SNS, error) {
	if client == nil || !strings.HasPrefix(topicARN, "arn:") {
		return nil, fmt.Errorf("%w: SNS sink needs a client and a topic ARN, got %q", ErrConfig, topicARN)
	}
	return &SNS{client: client, topic: topicARN, fifo: strings.HasSuffix(topicARN, ".fifo")}, nil
}

// Name is "sns".
func (s *SNS) Name() string { return "sns" }

// Publish sends the records with PublishBatch, 10 at a time, with the
// message attributes request_id, decision_id and status. On FIFO topics
// the group is the request id and the deduplication id the sha256 of the
// key.
func (s *SNS) Publish(ctx context.Context, recs []Record) error {
	entries, err := recordEntries(recs, s.fifo)
	if err != nil {
		return err
	}
	return publishBatches(ctx, entries, "sns "+s.topic, s.send)
}

// PublishEvents sends one notification per event, message the event's
// body, with PublishBatch, 10 at a time, with the message attributes event
// (the kind), request_id and decision_id. On FIFO topics the group is the
// request id and the deduplication id the sha256 of the event's key.
func (s *SNS) PublishEvents(ctx context.Context, evs []Event) error {
	entries, err := eventEntries(evs, s.fifo)
	if err != nil {
		return err
	}
	return publishBatches(ctx, entries, "sns "+s.topic, s.send)
}

// send is PublishBatch for publishBatches.
func (s *SNS) send(ctx context.Context, es []batchEntry) ([]batchFailure, error) {
	entries := make([]types.PublishBatchRequestEntry, len(es))
	for i, e := range es {
		entries[i] = types.PublishBatchRequestEntry{Id: aws.String(e.id), Message: aws.String(e.body),
			MessageAttributes: map[string]types.MessageAttributeValue{}}
		for k, v := range e.attrs {
			entries[i].MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
		if e.group != "" {
			entries[i].MessageGroupId, entries[i].MessageDeduplicationId = aws.String(e.group), aws.String(e.dedup)
		}
	}
	out, err := s.client.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(s.topic), PublishBatchRequestEntries: entries})
	if err != nil {
		return nil, err
	}
	failed := make([]batchFailure, len(out.Failed))
	for i, f := range out.Failed {
		failed[i] = batchFailure{aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)}
	}
	return failed, nil
}
