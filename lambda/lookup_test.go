package lambda_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/lambda"
)

// getEvent is an API Gateway HTTP API GET with a key.
func getEvent(path, query, key string) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{RawPath: path, RawQueryString: query, Headers: map[string]string{"x-api-key": key}}
	ev.RequestContext.HTTP.Method = "GET"
	return ev
}

// The Lambda answers the lookups from its results store as verdict up
// does: the 202 links to them, the request is queued, then partial, then
// done; another tenant's id is 404 like an unknown one; a malformed id
// is 400; every error carries a request id.
func TestLookupsThroughTheLambdaEvent(t *testing.T) {
	t.Parallel()
	store, err := results.OpenLocal(tempDir(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	b := setup(t, func(c *lambda.Config) { c.Results, c.ResultsLocation, c.DecisionLocation = store, "", "" })

	status, body := invoke(t, b.h, loadEvent(t, "httpapi-semif.json"))
	require.Equal(t, http.StatusAccepted, status.StatusCode, status.Body)
	id := body["request_id"].(string)
	require.Equal(t, "/v1/requests/"+id, body["results"], "the links default to the lookups")
	dec := body["decisions"].([]any)[0].(map[string]any)
	require.Equal(t, "/v1/decisions/"+dec["id"].(string)+"?request_id="+id, dec["results"])

	lookup := func(path, query, key string) (int, map[string]any) {
		resp, body := invoke(t, b.h, getEvent(path, query, key))
		return resp.StatusCode, body
	}
	code, st := lookup("/v1/requests/"+id, "", testKey)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "queued", st["status"])

	envs := drain(t, b.cpu)
	require.Len(t, envs, 1)
	d := envs[0].Decisions[0]
	require.NoError(t, store.Publish(context.Background(), []sink.Record{{RequestID: id, DecisionID: d.ID, Tenant: "acme",
		Status: decision.StatusDecided, Result: decision.Result{ID: d.ID, OptionIDs: d.OptionIDs(), Probabilities: []float64{1}}}}))
	code, st = lookup("/v1/requests/"+id, "", testKey)
	require.Equal(t, http.StatusOK, code)
	if len(envs[0].Decisions) == 1 {
		require.Equal(t, "done", st["status"])
	} else {
		require.Equal(t, "partial", st["status"])
	}
	code, st = lookup("/v1/decisions/"+d.ID, "request_id="+id, testKey)
	require.Equal(t, http.StatusOK, code, "%v", st)
	require.Equal(t, "done", st["decisions"].([]any)[0].(map[string]any)["status"])

	for _, tc := range []struct {
		path, query, key string
		status           int
	}{
		{"/v1/requests/" + id, "", "other-key-987654321", http.StatusNotFound},
		{"/v1/decisions/" + d.ID, "", "other-key-987654321", http.StatusNotFound},
		{"/v1/decisions/" + d.ID, "request_id=" + id, "other-key-987654321", http.StatusNotFound},
		{"/v1/requests/req_unknown", "", testKey, http.StatusNotFound},
		{"/v1/requests/" + strings.Repeat("x", 513), "", testKey, http.StatusBadRequest},
		{"/v1/requests/%00x", "", testKey, http.StatusBadRequest},
		{"/v1/requests/%zz", "", testKey, http.StatusBadRequest},
		{"/v1/decisions/" + d.ID, "request_id=%01", testKey, http.StatusBadRequest},
		{"/v1/requests/" + id, "", "", http.StatusUnauthorized},
	} {
		code, body := lookup(tc.path, tc.query, tc.key)
		require.Equal(t, tc.status, code, "%s?%s: %v", tc.path, tc.query, body)
		require.NotEmpty(t, body["request_id"], "%s: every error answer carries a request id", tc.path)
		require.NotEmpty(t, body["message"])
	}

	post := getEvent("/v1/requests/"+id, "", testKey)
	post.RequestContext.HTTP.Method = "POST"
	resp, _ := invoke(t, b.h, post)
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, "GET", resp.Headers["Allow"])
}

// Without a results store the lookups are 404 with a message that says
// where results are; a failing store is 503 with Retry-After, never 500.
func TestLookupsWithoutOrWithAFailingStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, body := invoke(t, b.h, getEvent("/v1/requests/req_1", "", testKey))
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, body["message"], "results are not stored here")

	b = setup(t, func(c *lambda.Config) { c.Results = failingStore{} })
	resp, body = invoke(t, b.h, getEvent("/v1/requests/req_1", "", testKey))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NotEmpty(t, resp.Headers["Retry-After"])
	require.Equal(t, "unavailable", body["code"])
	require.NotContains(t, resp.Body, "no-such-table", "the cause is logged, not answered")
}

// failingStore fails every call as a missing table does (a fake: the
// DynamoDB store's own failures are tested in internal/results on moto).
type failingStore struct{ results.Store }

func (failingStore) Request(context.Context, string) (results.Entry, error) {
	return results.Entry{}, errors.New("results table no-such-table does not exist")
}
