package lambda_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/lambda"
)

const reviewKey = "review-key-0123456789"

// eventSink remembers the events it was given (a fake of the SQS, SNS
// and webhook sinks, whose publishing is tested in internal/sink).
type eventSink struct {
	mu  sync.Mutex
	evs []sink.Event
}

func (s *eventSink) Name() string { return "events" }
func (s *eventSink) PublishEvents(_ context.Context, evs []sink.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, evs...)
	return nil
}

func event(method, path, query, key, body string) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{RawPath: path, RawQueryString: query, Body: body,
		Headers: map[string]string{"x-api-key": key, "content-type": "application/json"}}
	ev.RequestContext.HTTP.Method = method
	return ev
}

// The feedback call and the review inbox through the Lambda's event
// handler over a real results store: a review shows its state to keys
// granted review only; an answer is 201, a replay 200 and no second
// label, other tenants 404, a wrong option 422, a decision without a
// result 409; every recorded answer reaches the feedback sinks and the
// observer once, and leaves the inbox.
func TestFeedbackAndReviewsThroughTheLambda(t *testing.T) {
	t.Parallel()
	store, err := results.OpenLocal(tempDir(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	events := &eventSink{}
	var observed []results.Feedback
	b := setup(t, func(c *lambda.Config) {
		c.Results, c.FeedbackSinks = store, []sink.EventSink{events}
		c.APIKeys[reviewKey] = "acme:review"
		c.OnFeedback = func(_ results.Stored, fb results.Feedback) { observed = append(observed, fb) }
		c.NowFunc = func() time.Time { return time.Unix(1700000500, 0) }
	})
	ctx := context.Background()
	require.NoError(t, store.Accept(ctx, results.Accepted{RequestID: "req_1", Tenant: "acme", AcceptedAt: time.Unix(1700000000, 0),
		Decisions: []results.AcceptedDecision{{ID: "t1"}, {ID: "t2"}}}))
	rec := sink.Record{RequestID: "req_1", DecisionID: "t1", Tenant: "acme", Status: decision.StatusReview,
		Result: decision.Result{ID: "t1", OptionIDs: []string{"billing", "tech"}, Probabilities: []float64{0.55, 0.45},
			Outcome: &decision.Outcome{Status: decision.StatusReview, Reason: "p_max 0.55 below 0.8"}},
		Input: &decision.Decision{ID: "t1", State: decision.State{Text: "<img src=x onerror=alert(1)> charged twice"}, Question: "Which team?",
			Options: []decision.Option{{ID: "billing", Description: "Billing."}, {ID: "tech", Description: "Tech."}}}}
	require.NoError(t, store.Publish(ctx, []sink.Record{rec}))

	resp, body := invoke(t, b.h, event("GET", "/v1/reviews", "", testKey, ""))
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a key without the grant reads no states")
	require.Contains(t, body["message"], "KEY=TENANT:review")
	resp, _ = invoke(t, b.h, event("GET", "/v1/reviews", "limit=0", reviewKey, ""))
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	resp, _ = invoke(t, b.h, event("GET", "/v1/reviews", "cursor=zz", reviewKey, ""))
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	resp, _ = invoke(t, b.h, event("GET", "/v1/reviews", "", reviewKey, ""))
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	var page lambda.ReviewPage
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &page))
	require.Len(t, page.Reviews, 1)
	rv := page.Reviews[0]
	require.Equal(t, "<img src=x onerror=alert(1)> charged twice", rv.State)
	require.Equal(t, "p_max 0.55 below 0.8", rv.Reason)
	require.Equal(t, []lambda.ReviewOption{{ID: "billing", Description: "Billing.", Probability: 0.55}, {ID: "tech", Description: "Tech.", Probability: 0.45}}, rv.Options)

	post := func(decID, query, key, body string) (int, map[string]any) {
		resp, out := invoke(t, b.h, event("POST", "/v1/decisions/"+decID+"/feedback", query, key, body))
		return resp.StatusCode, out
	}
	code, out := post("t1", "request_id=req_1", testKey, `{"option":"tech","source":"zendesk","note":"customer said so"}`)
	require.Equal(t, http.StatusCreated, code, "%v", out)
	label := out["label"].(map[string]any)
	require.Equal(t, "tech", label["option"])
	require.Equal(t, "zendesk", label["source"])
	require.Regexp(t, `^key:[0-9a-f]{12}$`, label["by"], "who sent it, without the key")
	code, out = post("t1", "request_id=req_1", testKey, `{"option":"tech","source":"zendesk","note":"customer said so"}`)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, true, out["replay"])
	code, out = post("t1", "request_id=req_1", reviewKey, `{"option":"billing","source":"review"}`)
	require.Equal(t, http.StatusCreated, code, "%v", out)
	require.Len(t, out["history"], 1, "the older answer is kept")

	for _, tc := range []struct {
		decID, query, key, body string
		status                  int
		field                   string
	}{
		{"t1", "request_id=req_1", "other-key-987654321", `{"option":"tech"}`, http.StatusNotFound, ""},
		{"t1", "request_id=req_1", testKey, `{"option":"refund"}`, http.StatusUnprocessableEntity, "option"},
		{"t1", "request_id=req_1", testKey, `{"source":"x"}`, http.StatusUnprocessableEntity, "option"},
		{"t1", "", testKey, `{"option":"tech"}`, http.StatusUnprocessableEntity, "request_id"},
		{"t1", "request_id=req_1", testKey, `{"option":"tech"`, http.StatusBadRequest, ""},
		{"t1", "request_id=req_1", testKey, `{"option":"tech","label":"x"}`, http.StatusBadRequest, ""},
		{"t2", "request_id=req_1", testKey, `{"option":"tech"}`, http.StatusConflict, ""},
		{"zz", "request_id=req_1", testKey, `{"option":"tech"}`, http.StatusNotFound, ""},
		{"t1", "request_id=req_9", testKey, `{"option":"tech"}`, http.StatusNotFound, ""},
	} {
		code, out := post(tc.decID, tc.query, tc.key, tc.body)
		require.Equal(t, tc.status, code, "%+v: %v", tc, out)
		require.NotEmpty(t, out["request_id"], "every error carries a request id")
		if tc.field != "" {
			require.Equal(t, tc.field, out["fields"].([]any)[0].(map[string]any)["path"], "%+v", tc)
		}
	}
	resp, _ = invoke(t, b.h, event("GET", "/v1/decisions/t1/feedback", "request_id=req_1", testKey, ""))
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	labels, err := store.Labels(ctx, "req_1", "t1")
	require.NoError(t, err)
	require.Len(t, labels, 2, "the replay added nothing")
	require.Len(t, events.evs, 2, "each recorded answer is published once")
	require.Equal(t, lambda.EventFeedback, events.evs[0].Kind)
	require.Equal(t, "req_1", events.evs[0].RequestID)
	require.NotEqual(t, events.evs[0].Key, events.evs[1].Key)
	require.Len(t, observed, 2)

	resp, _ = invoke(t, b.h, event("GET", "/v1/reviews", "", reviewKey, ""))
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &page))
	require.Empty(t, page.Reviews, "an answered review leaves the inbox")
}
