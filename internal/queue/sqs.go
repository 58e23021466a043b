package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// SQSConfig configures an SQS queue. The zero value of a field means its
// default, given in the field's comment.
type SQSConfig struct {
	// URL is the queue URL. A URL ending in ".fifo" is a FIFO queue.
	// Required.
	URL string
	// Endpoint overrides the SQS endpoint (e.g. moto or LocalStack).
	// Defaults to AWS's endpoint for the region.
	Endpoint string
	// AWS is the SDK configuration (region, credentials). Defaults to
	// config.LoadDefaultConfig (environment, shared files, instance role).
	AWS *aws.Config
	// Visibility is the visibility timeout used when Receive does not give
	// one. Defaults to the queue's own setting.
	Visibility time.Duration
}

// SQS is a queue in Amazon SQS (standard or FIFO).
type SQS struct {
	cfg    SQSConfig
	client *sqs.Client
	fifo   bool
}

// LoadAWS returns the AWS SDK configuration from the environment, shared
// files or the instance role. region overrides the configured region when
// set; us-east-1 is used when none is found.
func LoadAWS(ctx context.Context, region string) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	c, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return c, fmt.Errorf("queue: load AWS configuration: %w", err)
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	return c, nil
}

// NewSQS connects to the queue at cfg.URL. It makes no request.
func NewSQS(ctx context.Context, cfg SQSConfig) (*SQS, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("%w: SQSConfig.URL is required", ErrConfig)
	}
	if !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://") {
		return nil, fmt.Errorf("%w: SQSConfig.URL must be an http(s) queue URL, got %q", ErrConfig, cfg.URL)
	}
	if cfg.Visibility < 0 || cfg.Visibility > MaxVisibility {
		return nil, fmt.Errorf("%w: SQSConfig.Visibility must be 0..12h, got %v", ErrConfig, cfg.Visibility)
	}
	var ac aws.Config
	if cfg.AWS != nil {
		ac = *cfg.AWS
	} else {
		var err error
		if ac, err = LoadAWS(ctx, ""); err != nil {
			return nil, err
		}
	}
	return &SQS{cfg: cfg, client: NewSQSClient(ac, cfg.Endpoint), fifo: strings.HasSuffix(cfg.URL, ".fifo")}, nil
}

// NewSQSClient builds an SQS client, pointed at endpoint when it is set.
func NewSQSClient(ac aws.Config, endpoint string) *sqs.Client {
	return sqs.NewFromConfig(ac, func(o *sqs.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}

// Client returns the underlying SQS client.
func (q *SQS) Client() *sqs.Client { return q.client }

// URL returns the queue URL.
func (q *SQS) URL() string { return q.cfg.URL }

// FIFO reports whether the queue is a FIFO queue.
func (q *SQS) FIFO() bool { return q.fifo }

// Close does nothing; the client holds no resources that need closing.
func (q *SQS) Close() error { return nil }

func seconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(math.Ceil(d.Seconds()))
}

// DedupID returns a FIFO deduplication id for key: its hex sha256 (SQS
// allows 128 characters of a limited alphabet).
func DedupID(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

// Send enqueues up to 10 messages with SendMessageBatch. On FIFO queues a
// missing GroupID becomes "default" and a missing DedupID the sha256 of
// the body.
func (q *SQS) Send(ctx context.Context, msgs []Outgoing) ([]error, error) {
	if err := checkBatch(len(msgs)); err != nil {
		return nil, err
	}
	errs := make([]error, len(msgs))
	var entries []types.SendMessageBatchRequestEntry
	for i, m := range msgs {
		if len(m.Body) > MaxMessageBytes {
			errs[i] = fmt.Errorf("%w: %d bytes", ErrTooLarge, len(m.Body))
			continue
		}
		e := types.SendMessageBatchRequestEntry{
			Id:          aws.String(strconv.Itoa(i)),
			MessageBody: aws.String(string(m.Body)),
		}
		if len(m.Attributes) > 0 {
			e.MessageAttributes = make(map[string]types.MessageAttributeValue, len(m.Attributes))
			for k, v := range m.Attributes {
				e.MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
			}
		}
		if q.fifo {
			g, d := m.GroupID, m.DedupID
			if g == "" {
				g = "default"
			}
			if d == "" {
				d = DedupID(string(m.Body))
			}
			e.MessageGroupId, e.MessageDeduplicationId = aws.String(g), aws.String(d)
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return errs, nil
	}
	out, err := q.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.cfg.URL), Entries: entries})
	if err != nil {
		return nil, q.wrap(ctx, "send", err)
	}
	for _, f := range out.Failed {
		if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i < len(errs) {
			errs[i] = batchError("send", f)
		}
	}
	return errs, nil
}

func batchError(op string, f types.BatchResultErrorEntry) error {
	return fmt.Errorf("queue: %s: %s: %s", op, aws.ToString(f.Code), aws.ToString(f.Message))
}

func (q *SQS) wrap(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist":
			return fmt.Errorf("queue: %s %s: %w: %w", op, q.cfg.URL, ErrNoQueue, err)
		}
	}
	return fmt.Errorf("queue: %s %s: %w", op, q.cfg.URL, err)
}

// Receive long-polls the queue (WaitTimeSeconds) for up to opts.Max
// messages, asking for their receive counts and attributes.
func (q *SQS) Receive(ctx context.Context, opts ReceiveOptions) ([]Message, error) {
	opts, err := opts.resolve(q.cfg.Visibility)
	if err != nil {
		return nil, err
	}
	in := &sqs.ReceiveMessageInput{
		QueueUrl:              aws.String(q.cfg.URL),
		MaxNumberOfMessages:   int32(opts.Max),
		WaitTimeSeconds:       seconds(opts.Wait),
		MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{
			types.MessageSystemAttributeNameApproximateReceiveCount,
			types.MessageSystemAttributeNameSentTimestamp,
			types.MessageSystemAttributeNameMessageGroupId,
		},
	}
	if opts.Visibility > 0 {
		in.VisibilityTimeout = seconds(opts.Visibility)
	}
	out, err := q.client.ReceiveMessage(ctx, in)
	if err != nil {
		return nil, q.wrap(ctx, "receive", err)
	}
	msgs := make([]Message, 0, len(out.Messages))
	for _, m := range out.Messages {
		msg := Message{
			ID:      aws.ToString(m.MessageId),
			Receipt: aws.ToString(m.ReceiptHandle),
			Body:    []byte(aws.ToString(m.Body)),
			GroupID: m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)],
		}
		msg.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
			msg.SentAt = time.UnixMilli(ms)
		}
		if len(m.MessageAttributes) > 0 {
			msg.Attributes = make(map[string]string, len(m.MessageAttributes))
			for k, v := range m.MessageAttributes {
				msg.Attributes[k] = aws.ToString(v.StringValue)
			}
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// Delete removes held messages with DeleteMessageBatch.
func (q *SQS) Delete(ctx context.Context, receipts []string) ([]error, error) {
	if err := checkBatch(len(receipts)); err != nil {
		return nil, err
	}
	if len(receipts) == 0 {
		return nil, nil
	}
	entries := make([]types.DeleteMessageBatchRequestEntry, len(receipts))
	for i, r := range receipts {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r)}
	}
	out, err := q.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.cfg.URL), Entries: entries})
	if err != nil {
		return nil, q.wrap(ctx, "delete", err)
	}
	return failedEntries("delete", len(receipts), out.Failed), nil
}

func failedEntries(op string, n int, failed []types.BatchResultErrorEntry) []error {
	errs := make([]error, n)
	for _, f := range failed {
		if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i < n {
			errs[i] = batchError(op, f)
			if code := aws.ToString(f.Code); strings.Contains(code, "ReceiptHandleIsInvalid") || strings.Contains(code, "MessageNotInflight") {
				errs[i] = fmt.Errorf("%w: %w", ErrStaleReceipt, errs[i])
			}
		}
	}
	return errs
}

// ChangeVisibility sets visibility timeouts with
// ChangeMessageVisibilityBatch (rounded up to whole seconds).
func (q *SQS) ChangeVisibility(ctx context.Context, vs []Visibility) ([]error, error) {
	if err := checkBatch(len(vs)); err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, nil
	}
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(vs))
	for i, v := range vs {
		if v.Timeout < 0 || v.Timeout > MaxVisibility {
			return nil, errors.New("queue: visibility timeout must be 0..12h")
		}
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(v.Receipt), VisibilityTimeout: seconds(v.Timeout),
		}
	}
	out, err := q.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.cfg.URL), Entries: entries})
	if err != nil {
		return nil, q.wrap(ctx, "change visibility", err)
	}
	return failedEntries("change visibility", len(vs), out.Failed), nil
}
