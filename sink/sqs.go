package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/verdict-dev/verdict/queue"
)

// SQS publishes one message per record on a results queue.
type SQS struct {
	client *sqs.Client
	url    string
	fifo   bool
}

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

func attributes(r *Record) map[string]string {
	return map[string]string{"request_id": r.RequestID, "decision_id": r.DecisionID, "status": string(r.Status)}
}

// Publish sends the records in batches of 10. On FIFO queues the group is
// the request id and the deduplication id the sha256 of the key.
func (s *SQS) Publish(ctx context.Context, recs []Record) error {
	for start := 0; start < len(recs); start += queue.MaxBatch {
		end := min(start+queue.MaxBatch, len(recs))
		entries := make([]types.SendMessageBatchRequestEntry, 0, end-start)
		for i := start; i < end; i++ {
			body, err := recs[i].Marshal()
			if err != nil {
				return fmt.Errorf("%w: %v", ErrPermanent, err)
			}
			e := types.SendMessageBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(i)),
				MessageBody:       aws.String(string(body)),
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
		out, err := s.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(s.url), Entries: entries})
		if err != nil {
			return fmt.Errorf("sink: sqs %s: %w", s.url, err)
		}
		var errs []error
		for _, f := range out.Failed {
			errs = append(errs, fmt.Errorf("sink: sqs %s: entry %s: %s: %s", s.url, aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}
