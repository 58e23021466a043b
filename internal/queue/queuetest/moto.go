// Package queuetest holds helpers for tests of queues and their users: a
// moto_server started on 127.0.0.1 and a conformance suite that every
// queue.Queue implementation passes.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/verdict-dev/verdict/internal/queue"
)

// Moto is a moto_server process serving AWS APIs on 127.0.0.1.
type Moto struct {
	// Endpoint is the server's base URL.
	Endpoint string
	cmd      *exec.Cmd
	once     sync.Once
	n        int
	mu       sync.Mutex
}

// StartMoto starts moto_server on a free port of 127.0.0.1 and waits until
// it answers. Call Stop when done.
func StartMoto() (*Moto, error) {
	path, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("moto_server is not installed (pip install 'moto[server]'): %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	m := &Moto{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port)}
	m.cmd = exec.Command(path, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	if os.Getenv("VERDICT_MOTO_LOG") != "" {
		m.cmd.Stdout, m.cmd.Stderr = os.Stderr, os.Stderr
	}
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(m.Endpoint + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			return m, nil
		}
		if time.Now().After(deadline) {
			m.Stop()
			return nil, fmt.Errorf("moto_server did not answer on %s: %v", m.Endpoint, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop kills the server (and anything it started).
func (m *Moto) Stop() {
	m.once.Do(func() {
		if m.cmd.Process != nil {
			_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
			_ = m.cmd.Wait()
		}
	})
}

// AWS returns an SDK configuration with static test credentials.
func (m *Moto) AWS() aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
}

// SQS returns an SQS client for the server.
func (m *Moto) SQS() *sqs.Client { return queue.NewSQSClient(m.AWS(), m.Endpoint) }

// QueueOptions shape a test queue.
type QueueOptions struct {
	// FIFO makes a FIFO queue (content-based dedup off).
	FIFO bool
	// Visibility is the queue's default visibility timeout. Defaults to 30 s.
	Visibility time.Duration
	// MaxReceives, when > 0, attaches a dead-letter queue with this
	// maxReceiveCount.
	MaxReceives int
}

// TestQueue is a queue made on the server.
type TestQueue struct {
	URL    string
	DLQURL string
}

// CreateQueue makes a uniquely named queue (and its DLQ when asked).
func (m *Moto) CreateQueue(ctx context.Context, prefix string, o QueueOptions) (TestQueue, error) {
	m.mu.Lock()
	m.n++
	name := fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), m.n)
	m.mu.Unlock()
	c := m.SQS()
	suffix := ""
	if o.FIFO {
		suffix = ".fifo"
	}
	attrs := map[string]string{}
	if o.FIFO {
		attrs["FifoQueue"] = "true"
	}
	vis := o.Visibility
	if vis == 0 {
		vis = 30 * time.Second
	}
	attrs["VisibilityTimeout"] = strconv.Itoa(int(vis.Seconds()))
	var tq TestQueue
	if o.MaxReceives > 0 {
		dattrs := map[string]string{}
		if o.FIFO {
			dattrs["FifoQueue"] = "true"
		}
		out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq" + suffix), Attributes: dattrs})
		if err != nil {
			return tq, fmt.Errorf("create dlq: %w", err)
		}
		tq.DLQURL = aws.ToString(out.QueueUrl)
		ga, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			return tq, fmt.Errorf("dlq arn: %w", err)
		}
		attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`,
			ga.Attributes[string(types.QueueAttributeNameQueueArn)], o.MaxReceives)
	}
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + suffix), Attributes: attrs})
	if err != nil {
		return tq, fmt.Errorf("create queue: %w", err)
	}
	tq.URL = aws.ToString(out.QueueUrl)
	return tq, nil
}

// Count returns the approximate numbers of visible and in-flight messages
// of a queue.
func (m *Moto) Count(ctx context.Context, url string) (visible, inFlight int, err error) {
	out, err := m.SQS().GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		}})
	if err != nil {
		return 0, 0, err
	}
	visible, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inFlight, nil
}

// Drain receives (and deletes) every message of a queue until a receive
// waiting wait comes back empty.
func Drain(ctx context.Context, q queue.Queue, wait time.Duration) ([]queue.Message, error) {
	var all []queue.Message
	for {
		msgs, err := q.Receive(ctx, queue.ReceiveOptions{Max: 10, Wait: wait, Visibility: time.Minute})
		if err != nil {
			return all, err
		}
		if len(msgs) == 0 {
			return all, nil
		}
		receipts := make([]string, len(msgs))
		for i, m := range msgs {
			receipts[i] = m.Receipt
		}
		errs, err := q.Delete(ctx, receipts)
		if err != nil {
			return all, err
		}
		if err := errors.Join(errs...); err != nil {
			return all, err
		}
		all = append(all, msgs...)
	}
}
