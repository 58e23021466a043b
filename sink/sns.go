package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/verdict-dev/verdict/queue"
)

// SNS publishes one notification per record on a topic.
type SNS struct {
	client *sns.Client
	topic  string
	fifo   bool
}

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

// Publish sends the records with PublishBatch, 10 at a time.
func (s *SNS) Publish(ctx context.Context, recs []Record) error {
	for start := 0; start < len(recs); start += queue.MaxBatch {
		end := min(start+queue.MaxBatch, len(recs))
		entries := make([]types.PublishBatchRequestEntry, 0, end-start)
		for i := start; i < end; i++ {
			body, err := recs[i].Marshal()
			if err != nil {
				return fmt.Errorf("%w: %v", ErrPermanent, err)
			}
			e := types.PublishBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(i)),
				Message:           aws.String(string(body)),
				MessageAttributes: map[string]types.MessageAttributeValue{},
			}
			for k, v := range attributes(&recs[i]) {
				e.MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
			}
			if s.fifo {
				e.MessageGroupId = aws.String(recs[i].RequestID)
				e.MessageDeduplicationId = aws.String(queue.DedupID(recs[i].Key()))
			}
			entries = append(entries, e)
		}
		out, err := s.client.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(s.topic), PublishBatchRequestEntries: entries})
		if err != nil {
			return fmt.Errorf("sink: sns %s: %w", s.topic, err)
		}
		var errs []error
		for _, f := range out.Failed {
			errs = append(errs, fmt.Errorf("sink: sns %s: entry %s: %s: %s", s.topic, aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}
