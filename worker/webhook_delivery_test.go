package worker_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/router"
	"github.com/verdict-dev/verdict/worker"
)

func replyEnvelope(reqID, replyURL string, ds ...decision.Decision) queue.Outgoing {
	env := queue.Envelope{RequestID: reqID, Tenant: "t1", SubmittedAt: time.Unix(1700000000, 0).UTC(),
		Route: decision.RouteCPU, GroupKey: router.GroupKey(ds[0].State), Format: queue.FormatSemIf, Decisions: ds,
		Reply: []queue.ReplyTarget{{Kind: "webhook", URL: replyURL}}}
	b, err := env.Marshal()
	if err != nil {
		panic(err)
	}
	return queue.Outgoing{Body: b}
}

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) handler(status int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
		w.WriteHeader(status)
	})
}
func (c *counter) get() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// The operator's --webhook-url answers 503 (transient); the request's own
// reply URL answers 400 (permanent). The message must be kept for another
// try (it was deleted when one permanent failure made the joined error
// permanent).
func TestTransientWebhookFailureIsNotMaskedByPermanentReply(t *testing.T) {
	var op, reply counter
	opSrv := httptest.NewServer(op.handler(http.StatusServiceUnavailable))
	defer opSrv.Close()
	replySrv := httptest.NewServer(reply.handler(http.StatusBadRequest))
	defer replySrv.Close()
	wh, err := sink.NewWebhook(sink.WebhookConfig{URL: opSrv.URL, Secret: []byte("s"), AllowPrivate: true, Attempts: 1})
	require.NoError(t, err)
	b := setup(t, "local", bundleOpts{})
	b.send(t, replyEnvelope("r1", replySrv.URL, mkDecision("a", "st", "q?")))
	// wired as cmd/verdict does with --webhook-url: in Sinks and as Webhook.
	// The queue action follows the publish: once the message is acted on,
	// it was released (not deleted).
	w := start(t, worker.Config{Queue: b.q, Scorer: &fakeScorer{}, Sinks: []sink.Sink{b.sink, wh}, Webhook: wh, RetryBase: time.Minute})
	eventually(t, 10*time.Second, func() bool {
		return strings.Contains(metricsText(w), `verdict_worker_messages_released_total{reason="publish"} 1`)
	}, "the message was not released after the operator webhook failed")
	require.NotZero(t, b.depth(t), "message deleted although the operator webhook (503) never accepted its record; op posts=%d reply posts=%d", op.get(), reply.get())
}

// With --webhook-url set, the Webhook is both a sink and Config.Webhook, so
// every record with a reply URL is POSTed twice to each target per
// processing.
func TestWebhookPostsOncePerTargetWhenAlsoASink(t *testing.T) {
	var op, reply counter
	opSrv := httptest.NewServer(op.handler(http.StatusOK))
	defer opSrv.Close()
	replySrv := httptest.NewServer(reply.handler(http.StatusOK))
	defer replySrv.Close()
	wh, err := sink.NewWebhook(sink.WebhookConfig{URL: opSrv.URL, Secret: []byte("s"), AllowPrivate: true, Attempts: 1})
	require.NoError(t, err)
	b := setup(t, "local", bundleOpts{})
	b.send(t, replyEnvelope("r1", replySrv.URL, mkDecision("a", "st", "q?")))
	start(t, worker.Config{Queue: b.q, Scorer: &fakeScorer{}, Sinks: []sink.Sink{b.sink, wh}, Webhook: wh})
	eventually(t, 10*time.Second, func() bool { return b.depth(t) == 0 }, "not deleted")
	require.Equal(t, 1, op.get(), "operator webhook posts for one record")
	require.Equal(t, 1, reply.get(), "reply webhook posts for one record")
}

// A reply webhook that keeps failing transiently (503) has its message
// retried until it dead-letters, but the other sinks, which accepted the
// records on the first attempt, do not get a copy on every attempt.
func TestFailingReplyWebhookDoesNotRepublishToOtherSinks(t *testing.T) {
	t.Parallel()
	var reply counter
	replySrv := httptest.NewServer(reply.handler(http.StatusServiceUnavailable))
	defer replySrv.Close()
	wh, err := sink.NewWebhook(sink.WebhookConfig{Secret: []byte("s"), AllowPrivate: true, Attempts: 1})
	require.NoError(t, err)
	defer wh.Close()
	b := setup(t, "local", bundleOpts{maxReceives: 3})
	b.send(t, replyEnvelope("r1", replySrv.URL, mkDecision("a", "st", "q?")))
	cs := &countingSink{Sink: b.sink}
	start(t, worker.Config{Queue: b.q, Scorer: &fakeScorer{}, Sinks: []sink.Sink{cs}, Webhook: wh, RetryBase: worker.None})
	eventually(t, 30*time.Second, func() bool { return b.dead(t) == 1 }, "the message did not dead-letter")
	require.Equal(t, 3, reply.get(), "the failing reply webhook is tried once per receive")
	require.EqualValues(t, 1, cs.n.Load(), "the store got one copy per attempt")
}

// A reply URL whose host does not exist fails for good: the message is
// answered and deleted at once, not retried until it dead-letters.
func TestUnresolvableReplyHostIsPermanent(t *testing.T) {
	t.Parallel()
	const host = "verdict-webhook-test.invalid"
	_, err := net.DefaultResolver.LookupHost(context.Background(), host)
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Skipf("this machine's resolver does not answer NXDOMAIN for %s: %v", host, err)
	}
	wh, err := sink.NewWebhook(sink.WebhookConfig{Secret: []byte("s"), Backoff: time.Millisecond})
	require.NoError(t, err)
	defer wh.Close()
	b := setup(t, "local", bundleOpts{maxReceives: 3})
	b.send(t, replyEnvelope("r1", "https://"+host+"/hook", mkDecision("a", "st", "q?")))
	cs := &countingSink{Sink: b.sink}
	w := start(t, worker.Config{Queue: b.q, Scorer: &fakeScorer{}, Sinks: []sink.Sink{cs}, Webhook: wh, RetryBase: worker.None})
	eventually(t, 30*time.Second, func() bool { return b.depth(t) == 0 }, "the message was not deleted")
	require.Zero(t, b.dead(t))
	require.EqualValues(t, 1, cs.n.Load())
	require.Contains(t, metricsText(w), `verdict_worker_publish_errors_total{kind="permanent",sink="webhook"} 1`)
}
