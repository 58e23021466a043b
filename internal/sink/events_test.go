package sink_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/internal/sink"
)

// feedback is a feedback event on decision decID of request reqID; n
// tells answers to the same decision apart.
func feedback(reqID, decID string, n int) sink.Event {
	return sink.Event{Kind: "feedback", RequestID: reqID, DecisionID: decID,
		Key:  fmt.Sprintf("%s/%s/%d", reqID, decID, n),
		Body: fmt.Appendf(nil, `{"request_id":%q,"decision_id":%q,"tenant":"t","option":"b","source":"ticket","note":"%d","by":"agent","at":"2026-11-30T04:00:00Z"}`, reqID, decID, n)}
}

// drain reads every message on the queue at url.
func drain(t *testing.T, moto *queuetest.Moto, url string) []queue.Message {
	t.Helper()
	ctx := context.Background()
	ac := moto.AWS()
	q, err := queue.NewSQS(ctx, queue.SQSConfig{URL: url, Endpoint: moto.Endpoint, AWS: &ac})
	require.NoError(t, err)
	msgs, err := queuetest.Drain(ctx, q, time.Second)
	require.NoError(t, err)
	return msgs
}

// requireEvent checks that m is the message of ev.
func requireEvent(t *testing.T, ev sink.Event, m queue.Message) {
	t.Helper()
	require.Equal(t, string(ev.Body), string(m.Body))
	require.Equal(t, map[string]string{"event": ev.Kind, "request_id": ev.RequestID, "decision_id": ev.DecisionID}, m.Attributes)
}

func TestSQSEventsStandard(t *testing.T) {
	t.Parallel()
	moto := queuetest.SharedMoto(t)
	ctx := context.Background()
	tq, err := moto.CreateQueue(ctx, "events", queuetest.QueueOptions{})
	require.NoError(t, err)
	s, err := sink.NewSQS(moto.SQS(), tq.URL)
	require.NoError(t, err)
	want := map[string]sink.Event{}
	var evs []sink.Event
	for i := range 13 { // two batches
		ev := feedback("r", fmt.Sprint("d", i), i)
		evs = append(evs, ev)
		want[string(ev.Body)] = ev
	}
	require.NoError(t, s.PublishEvents(ctx, evs))
	msgs := drain(t, moto, tq.URL)
	require.Len(t, msgs, 13)
	for _, m := range msgs {
		ev, ok := want[string(m.Body)]
		require.True(t, ok, "unexpected body %s", m.Body)
		requireEvent(t, ev, m)
		delete(want, string(m.Body))
	}
	require.NoError(t, s.PublishEvents(ctx, nil), "no events, nothing to send")
}

// Events and records share a FIFO queue: both are grouped by request id,
// deduplicated by their keys, and told apart by the event attribute.
func TestSQSEventsAndRecordsFIFO(t *testing.T) {
	t.Parallel()
	moto := queuetest.SharedMoto(t)
	ctx := context.Background()
	tq, err := moto.CreateQueue(ctx, "results", queuetest.QueueOptions{FIFO: true})
	require.NoError(t, err)
	s, err := sink.NewSQS(moto.SQS(), tq.URL)
	require.NoError(t, err)
	recs := []sink.Record{rec("r", "a"), rec("r", "b")}
	evs := []sink.Event{feedback("r", "a", 1), feedback("r", "a", 2)}
	require.NoError(t, s.Publish(ctx, recs))
	require.NoError(t, s.PublishEvents(ctx, evs))
	require.NoError(t, s.PublishEvents(ctx, evs[:1]), "a resent event is accepted")
	require.NoError(t, s.Publish(ctx, recs[:1]), "a resent record is accepted")
	msgs := drain(t, moto, tq.URL)
	require.Len(t, msgs, 4, "the FIFO deduplication id dropped the second copies")
	var gotRecs, gotEvs []queue.Message
	for _, m := range msgs {
		require.Equal(t, "r", m.GroupID)
		if _, ok := m.Attributes["event"]; ok {
			gotEvs = append(gotEvs, m)
		} else {
			gotRecs = append(gotRecs, m)
		}
	}
	require.Len(t, gotRecs, 2)
	for _, m := range gotRecs {
		require.Equal(t, map[string]string{"request_id": "r", "decision_id": m.Attributes["decision_id"], "status": "decided"}, m.Attributes,
			"records keep their attributes and have no event attribute")
	}
	require.Len(t, gotEvs, 2)
	byBody := map[string]sink.Event{string(evs[0].Body): evs[0], string(evs[1].Body): evs[1]}
	for _, m := range gotEvs {
		ev, ok := byBody[string(m.Body)]
		require.True(t, ok, "unexpected body %s", m.Body)
		requireEvent(t, ev, m)
	}
}

// snsToQueue builds an SNS sink on a new topic with a queue subscribed to
// it (raw delivery, so the queue's messages carry the notifications'
// bodies and attributes), both FIFO when fifo; it returns the queue's URL.
func snsToQueue(t *testing.T, moto *queuetest.Moto, fifo bool) (*sink.SNS, string) {
	t.Helper()
	ctx := context.Background()
	snsc := sink.NewSNSClient(moto.AWS(), moto.Endpoint)
	in := &sns.CreateTopicInput{Name: aws.String(fmt.Sprintf("events-%d", time.Now().UnixNano()))}
	if fifo {
		in.Name, in.Attributes = aws.String(*in.Name+".fifo"), map[string]string{"FifoTopic": "true"}
	}
	topic, err := snsc.CreateTopic(ctx, in)
	require.NoError(t, err)
	tq, err := moto.CreateQueue(ctx, "subscriber", queuetest.QueueOptions{FIFO: fifo})
	require.NoError(t, err)
	ga, err := moto.SQS().GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(tq.URL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	require.NoError(t, err)
	_, err = snsc.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"),
		Endpoint: aws.String(ga.Attributes["QueueArn"]), Attributes: map[string]string{"RawMessageDelivery": "true"}})
	require.NoError(t, err)
	s, err := sink.NewSNS(snsc, aws.ToString(topic.TopicArn))
	require.NoError(t, err)
	return s, tq.URL
}

func TestSNSEventsStandard(t *testing.T) {
	t.Parallel()
	moto := queuetest.SharedMoto(t)
	ctx := context.Background()
	s, url := snsToQueue(t, moto, false)
	ev := feedback("sns-req", "d", 1)
	require.NoError(t, s.PublishEvents(ctx, []sink.Event{ev}))
	r := rec("sns-req", "d")
	require.NoError(t, s.Publish(ctx, []sink.Record{r}))
	msgs := drain(t, moto, url)
	require.Len(t, msgs, 2)
	want, _ := r.Marshal()
	for _, m := range msgs {
		if string(m.Body) == string(want) {
			require.Equal(t, map[string]string{"request_id": "sns-req", "decision_id": "d", "status": "decided"}, m.Attributes)
			continue
		}
		requireEvent(t, ev, m)
	}
}

func TestSNSEventsFIFODedup(t *testing.T) {
	t.Parallel()
	moto := queuetest.SharedMoto(t)
	ctx := context.Background()
	s, url := snsToQueue(t, moto, true)
	evs := []sink.Event{feedback("r", "a", 1), feedback("r", "a", 2)}
	require.NoError(t, s.PublishEvents(ctx, evs))
	require.NoError(t, s.PublishEvents(ctx, evs[:1]), "a resent event is accepted")
	require.NoError(t, s.Publish(ctx, []sink.Record{rec("r", "a")}))
	msgs := drain(t, moto, url)
	require.Len(t, msgs, 3, "the FIFO deduplication id dropped the resent event")
	events := 0
	for _, m := range msgs {
		require.Equal(t, "r", m.GroupID)
		if m.Attributes["event"] != "" {
			events++
		}
	}
	require.Equal(t, 2, events)
}

// An event no sink can publish fails permanently, naming the field, and
// nothing of the batch is sent.
func TestInvalidEventsArePermanent(t *testing.T) {
	t.Parallel()
	moto := queuetest.SharedMoto(t)
	ctx := context.Background()
	tq, err := moto.CreateQueue(ctx, "events", queuetest.QueueOptions{})
	require.NoError(t, err)
	sq, err := sink.NewSQS(moto.SQS(), tq.URL)
	require.NoError(t, err)
	h := &eventHook{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	wh, err := sink.NewWebhook(sink.WebhookConfig{URL: srv.URL, Secret: []byte("k"), AllowPrivate: true, Backoff: time.Millisecond})
	require.NoError(t, err)
	defer wh.Close()
	for _, tc := range []struct {
		field string
		edit  func(*sink.Event)
	}{
		{"event[1].kind", func(e *sink.Event) { e.Kind = "" }},
		{"event[1].request_id", func(e *sink.Event) { e.RequestID = "" }},
		{"event[1].decision_id", func(e *sink.Event) { e.DecisionID = "" }},
		{"event[1].key", func(e *sink.Event) { e.Key = "" }},
		{"event[1].body", func(e *sink.Event) { e.Body = nil }},
		{"event[1].body", func(e *sink.Event) { e.Body = []byte("{not json") }},
	} {
		bad := feedback("r", "d", 1)
		tc.edit(&bad)
		evs := []sink.Event{feedback("r", "d", 0), bad}
		for _, s := range []sink.EventSink{sq, wh} {
			err := s.PublishEvents(ctx, evs)
			require.ErrorIs(t, err, sink.ErrPermanent, s.Name())
			require.ErrorContains(t, err, tc.field, s.Name())
		}
	}
	require.Empty(t, drain(t, moto, tq.URL))
	require.Empty(t, h.requests())
}

// eventHook records the requests it accepts; it answers the statuses in
// fail first, one per request.
type eventHook struct {
	mu       sync.Mutex
	fail     []int
	attempts int
	got      []*http.Request
	bodies   [][]byte
}

func (h *eventHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attempts++
	if len(h.fail) > 0 {
		w.WriteHeader(h.fail[0])
		h.fail = h.fail[1:]
		return
	}
	h.got = append(h.got, r)
	h.bodies = append(h.bodies, body)
}

func (h *eventHook) requests() []*http.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got
}

func TestWebhookEventsSignedWithKind(t *testing.T) {
	t.Parallel()
	h := &eventHook{fail: []int{http.StatusServiceUnavailable, http.StatusTooManyRequests}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	w, err := sink.NewWebhook(sink.WebhookConfig{URL: srv.URL + "/hook", Secret: []byte("k"), AllowPrivate: true, Backoff: time.Millisecond})
	require.NoError(t, err)
	defer w.Close()
	evs := []sink.Event{feedback("r", "a", 1), feedback("r", "b", 2)}
	require.NoError(t, w.PublishEvents(context.Background(), evs), "503 and 429 are retried")
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, 4, h.attempts)
	require.Len(t, h.got, 2)
	for i, r := range h.got {
		require.Equal(t, http.MethodPost, r.Method)
		require.Equal(t, "/hook", r.URL.Path, "only the configured URL")
		require.Equal(t, string(evs[i].Body), string(h.bodies[i]))
		require.Equal(t, "feedback", r.Header.Get(sink.HeaderEvent))
		require.Equal(t, evs[i].Key, r.Header.Get(sink.HeaderKey))
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		ts := r.Header.Get(sink.HeaderTimestamp)
		require.Equal(t, sink.Sign([]byte("k"), ts, h.bodies[i]), r.Header.Get(sink.HeaderSignature))
		require.True(t, sink.Verify([]byte("k"), ts, r.Header.Get(sink.HeaderSignature), h.bodies[i], time.Now(), time.Minute))
	}
}

func TestWebhookRecordsHaveNoEventHeader(t *testing.T) {
	t.Parallel()
	h := &eventHook{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	w, err := sink.NewWebhook(sink.WebhookConfig{URL: srv.URL, Secret: []byte("k"), AllowPrivate: true})
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.Publish(context.Background(), []sink.Record{rec("r", "d")}))
	got := h.requests()
	require.Len(t, got, 1)
	require.Empty(t, got[0].Header.Values(sink.HeaderEvent))
	require.Equal(t, "r/d", got[0].Header.Get(sink.HeaderKey))
}

func TestWebhookEventFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ev := feedback("r", "d", 1)

	h4 := &eventHook{fail: []int{http.StatusBadRequest}}
	srv4 := httptest.NewServer(h4)
	defer srv4.Close()
	w4, err := sink.NewWebhook(sink.WebhookConfig{URL: srv4.URL, Secret: []byte("k"), AllowPrivate: true, Backoff: time.Millisecond})
	require.NoError(t, err)
	defer w4.Close()
	require.ErrorIs(t, w4.PublishEvents(ctx, []sink.Event{ev}), sink.ErrPermanent, "4xx")
	h4.mu.Lock()
	require.Equal(t, 1, h4.attempts, "a 4xx is not retried")
	h4.mu.Unlock()

	h5 := &eventHook{fail: []int{500, 502, 503, 504}}
	srv5 := httptest.NewServer(h5)
	defer srv5.Close()
	w5, err := sink.NewWebhook(sink.WebhookConfig{URL: srv5.URL, Secret: []byte("k"), AllowPrivate: true, Backoff: time.Millisecond, Attempts: 3})
	require.NoError(t, err)
	defer w5.Close()
	err = w5.PublishEvents(ctx, []sink.Event{ev})
	require.Error(t, err)
	require.NotErrorIs(t, err, sink.ErrPermanent, "5xx may pass")
	h5.mu.Lock()
	require.Equal(t, 3, h5.attempts, "three attempts")
	h5.mu.Unlock()

	// One event refused for good and one that may pass: try again.
	hm := &eventHook{fail: []int{http.StatusNotFound, 503, 503}}
	srvm := httptest.NewServer(hm)
	defer srvm.Close()
	wm, err := sink.NewWebhook(sink.WebhookConfig{URL: srvm.URL, Secret: []byte("k"), AllowPrivate: true, Backoff: time.Millisecond, Attempts: 2})
	require.NoError(t, err)
	defer wm.Close()
	err = wm.PublishEvents(ctx, []sink.Event{ev, feedback("r", "d", 2)})
	require.Error(t, err)
	require.NotErrorIs(t, err, sink.ErrPermanent, "one transient failure keeps the events for another try")
}

func TestWebhookEventsWithoutURL(t *testing.T) {
	t.Parallel()
	w, err := sink.NewWebhook(sink.WebhookConfig{Secret: []byte("k")})
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.PublishEvents(context.Background(), []sink.Event{feedback("r", "d", 1)}), "no configured URL: nothing to do")
}
