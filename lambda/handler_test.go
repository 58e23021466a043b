package lambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/lambda"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/router"
)

const testKey = "acme-key-0123456789"

// bundle is one test's front door over real local (SQLite) queues.
type bundle struct {
	h   *lambda.Handler
	cpu *queue.Local
	gpu *queue.Local
}

func setup(t testing.TB, mutate ...func(*lambda.Config)) *bundle {
	t.Helper()
	dir := tempDir(t)
	open := func(name string) *queue.Local {
		q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(dir, "queue.db"), Name: name})
		require.NoError(t, err)
		t.Cleanup(func() { _ = q.Close() })
		return q
	}
	b := &bundle{cpu: open("cpu"), gpu: open("gpu")}
	cfg := lambda.Config{
		Queues:           map[decision.Route]queue.Sender{decision.RouteCPU: b.cpu, decision.RouteGPU: b.gpu},
		Router:           router.Config{CPU: true, GPU: true},
		APIKeys:          map[string]string{testKey: "acme", "other-key-987654321": "globex"},
		TrustAuthorizer:  true,
		ResultsLocation:  "/v1/requests/{request_id}",
		DecisionLocation: "/v1/decisions/{decision_id}?request_id={request_id}",
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h, err := lambda.New(cfg)
	require.NoError(t, err)
	b.h = h
	return b
}

// drain receives every visible message of q.
func drain(t testing.TB, q *queue.Local) []*queue.Envelope {
	t.Helper()
	var out []*queue.Envelope
	for {
		msgs, err := q.Receive(context.Background(), queue.ReceiveOptions{Max: 10, Visibility: time.Hour})
		require.NoError(t, err)
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			env, err := queue.UnmarshalEnvelope(m.Body)
			require.NoError(t, err)
			require.Equal(t, env.GroupKey, m.GroupID)
			require.Equal(t, env.RequestID, m.Attributes["request_id"])
			out = append(out, env)
		}
	}
}

func loadEvent(t *testing.T, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var ev events.APIGatewayV2HTTPRequest
	require.NoError(t, json.Unmarshal(b, &ev))
	return ev
}

// invoke runs an event through the Lambda adapter and decodes the answer
// after a JSON round trip, as the Lambda runtime would carry it.
func invoke(t *testing.T, h *lambda.Handler, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, map[string]any) {
	t.Helper()
	resp, err := h.HandleHTTPAPI(context.Background(), ev)
	require.NoError(t, err)
	wire, err := json.Marshal(resp)
	require.NoError(t, err)
	var back events.APIGatewayV2HTTPResponse
	require.NoError(t, json.Unmarshal(wire, &back))
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(back.Body), &body), "body %q", back.Body)
	require.Equal(t, "application/json", back.Headers["Content-Type"])
	return back, body
}

func TestFixturesRoundTrip(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var ev events.APIGatewayV2HTTPRequest
		if strings.HasPrefix(filepath.Base(f), "url-") {
			var u events.LambdaFunctionURLRequest
			require.NoError(t, json.Unmarshal(raw, &u), f)
			back, err := json.Marshal(u)
			require.NoError(t, err)
			require.JSONEq(t, string(raw), string(back), f)
			continue
		}
		require.NoError(t, json.Unmarshal(raw, &ev), f)
		back, err := json.Marshal(ev)
		require.NoError(t, err)
		var again events.APIGatewayV2HTTPRequest
		require.NoError(t, json.Unmarshal(back, &again), f)
		require.Equal(t, ev, again, f)
		require.NotEmpty(t, ev.RawPath, f)
		require.NotEmpty(t, ev.RequestContext.HTTP.Method, f)
	}
}

func TestSemIfAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, name := range []string{"httpapi-semif.json", "httpapi-semif-base64.json"} {
		resp, body := invoke(t, b.h, loadEvent(t, name))
		require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
		reqID := body["request_id"].(string)
		require.True(t, strings.HasPrefix(reqID, "req_"))
		require.Equal(t, "queued", body["status"])
		require.Equal(t, "cpu", body["route"])
		require.Equal(t, []any{"support-route"}, body["decision_ids"])
		require.Equal(t, "/v1/requests/"+reqID, body["results"])
		require.Equal(t, "/v1/requests/"+reqID, resp.Headers["Location"])
		require.Equal(t, reqID, resp.Headers["X-Request-Id"])
		d0 := body["decisions"].([]any)[0].(map[string]any)
		require.Equal(t, "/v1/decisions/support-route?request_id="+reqID, d0["results"])
		require.Equal(t, router.GroupKey(decision.TextState("Customer asks to reset a forgotten password and says the reset email never arrived.")), d0["group_key"])

		envs := drain(t, b.cpu)
		require.Len(t, envs, 1)
		env := envs[0]
		require.Equal(t, reqID, env.RequestID)
		require.Equal(t, "acme", env.Tenant)
		require.Equal(t, queue.FormatSemIf, env.Format)
		require.Equal(t, decision.RouteCPU, env.Route)
		require.Equal(t, []string{"account_access", "billing", "sales"}, env.Decisions[0].OptionIDs())
		require.Empty(t, drain(t, b.gpu))
	}
}

func TestNamedStagePrefix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ev := loadEvent(t, "httpapi-semif.json")
	ev.RequestContext.Stage, ev.RawPath = "prod", "/prod/v1/decisions"
	resp, _ := invoke(t, b.h, ev)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Len(t, drain(t, b.cpu), 1)
}

func TestSystemOneAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, body := invoke(t, b.h, loadEvent(t, "httpapi-systemone.json"))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	reqID := body["request_id"].(string)
	require.Equal(t, reqID, resp.Headers["X-Typesafe-Request-Id"])
	require.Equal(t, "jev-latest", body["model"])
	require.Equal(t, []any{"refund_asked", "topic", "urgency"}, body["decision_ids"])
	require.EqualValues(t, 1, body["messages"])

	envs := drain(t, b.cpu)
	require.Len(t, envs, 1, "questions share the state: one message")
	env := envs[0]
	require.Equal(t, queue.FormatSystemOne, env.Format)
	require.Equal(t, "jev-latest", env.Model)
	require.Len(t, env.Decisions, 3)
	require.Equal(t, []string{"true", "false"}, env.Decisions[0].OptionIDs())
	require.Equal(t, []string{"billing", "technical", "other"}, env.Decisions[1].OptionIDs())
	require.Equal(t, []string{"0", "1", "2"}, env.Decisions[2].OptionIDs())
}

func TestAuthorizerIdentities(t *testing.T) {
	t.Parallel()
	for name, tenant := range map[string]string{
		"httpapi-jwt.json":               "acme",
		"httpapi-lambda-authorizer.json": "acme",
	} {
		b := setup(t)
		resp, _ := invoke(t, b.h, loadEvent(t, name))
		require.Equal(t, http.StatusAccepted, resp.StatusCode, name)
		envs := drain(t, b.cpu)
		require.Len(t, envs, 1)
		require.Equal(t, tenant, envs[0].Tenant, name)
	}

	b := setup(t)
	raw, err := os.ReadFile("testdata/url-iam-semif.json")
	require.NoError(t, err)
	var ev events.LambdaFunctionURLRequest
	require.NoError(t, json.Unmarshal(raw, &ev))
	resp, err := b.h.HandleFunctionURL(context.Background(), ev)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	envs := drain(t, b.cpu)
	require.Len(t, envs, 1)
	require.Equal(t, "arn:aws:iam::111122223333:user/acme-bot", envs[0].Tenant)

	// Without TrustAuthorizer the identity is not enough.
	strict := setup(t, func(c *lambda.Config) { c.TrustAuthorizer = false })
	resp2, body := invoke(t, strict.h, loadEvent(t, "httpapi-jwt.json"))
	require.Equal(t, http.StatusUnauthorized, resp2.StatusCode)
	require.Equal(t, "unauthorized", body["code"])
}

func TestErrorStatuses(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *lambda.Config) {
		c.MaxBodyBytes = 4096
		c.Limits = decision.Limits{MaxStateBytes: 2000}
	})
	semif := loadEvent(t, "httpapi-semif.json")
	withBody := func(ev events.APIGatewayV2HTTPRequest, body string) events.APIGatewayV2HTTPRequest {
		ev.Body, ev.IsBase64Encoded = body, false
		return ev
	}
	withHeader := func(ev events.APIGatewayV2HTTPRequest, k, v string) events.APIGatewayV2HTTPRequest {
		h := map[string]string{}
		for hk, hv := range ev.Headers {
			h[hk] = hv
		}
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		ev.Headers = h
		return ev
	}
	withPath := func(ev events.APIGatewayV2HTTPRequest, method, path string) events.APIGatewayV2HTTPRequest {
		ev.RawPath, ev.RequestContext.HTTP.Method = path, method
		return ev
	}
	huge := `{"state": "` + strings.Repeat("x", 5000) + `", "question": "q?", "options": [{"id":"a","description":""},{"id":"b","description":""}]}`
	longState := `{"state": "` + strings.Repeat("x", 3000) + `", "question": "q?", "options": [{"id":"a","description":""},{"id":"b","description":""}]}`
	cases := []struct {
		name   string
		ev     events.APIGatewayV2HTTPRequest
		status int
		code   string
		check  func(t *testing.T, resp events.APIGatewayV2HTTPResponse, body map[string]any)
	}{
		{name: "malformed", ev: loadEvent(t, "httpapi-malformed.json"), status: 400, code: "malformed"},
		{name: "empty body", ev: withBody(semif, ""), status: 400, code: "malformed"},
		{name: "bad base64", ev: func() events.APIGatewayV2HTTPRequest { e := semif; e.Body, e.IsBase64Encoded = "%%%", true; return e }(), status: 400, code: "malformed"},
		{name: "body too large", ev: withBody(semif, huge), status: 413, code: "too_large"},
		{name: "state over decision limit", ev: withBody(semif, longState), status: 413, code: "too_large"},
		{name: "wrong content type", ev: loadEvent(t, "httpapi-wrong-content-type.json"), status: 415, code: "unsupported_media_type"},
		{name: "no content type", ev: withHeader(semif, "content-type", ""), status: 415, code: "unsupported_media_type"},
		{name: "invalid fields", ev: loadEvent(t, "httpapi-invalid.json"), status: 422, code: "invalid",
			check: func(t *testing.T, _ events.APIGatewayV2HTTPResponse, body map[string]any) {
				var paths []string
				for _, f := range body["fields"].([]any) {
					paths = append(paths, f.(map[string]any)["path"].(string))
				}
				require.Contains(t, paths, "decisions[0].state")
				require.Contains(t, paths, "decisions[1].metdata")
				require.GreaterOrEqual(t, len(paths), 2, "every problem is listed")
			}},
		{name: "systemone invalid", ev: withPath(withBody(semif, `{"state": "s", "questions": {"q": {"type": "maybe", "instructions": "x"}, "r": {"type": "score", "instructions": "y", "criteria": ["only one"]}}}`), "POST", "/v1/systemone/async"),
			status: 422, code: "invalid",
			check: func(t *testing.T, _ events.APIGatewayV2HTTPResponse, body map[string]any) {
				require.Contains(t, body["message"], "questions.q.type")
				require.Contains(t, body["message"], "questions.r.criteria")
			}},
		{name: "no key", ev: loadEvent(t, "httpapi-no-key.json"), status: 401, code: "unauthorized",
			check: func(t *testing.T, resp events.APIGatewayV2HTTPResponse, _ map[string]any) {
				require.Contains(t, resp.Headers["Www-Authenticate"], "Bearer")
			}},
		{name: "wrong key", ev: withHeader(semif, "x-api-key", "acme-key-0123456780"), status: 401, code: "unauthorized"},
		{name: "wrong bearer", ev: withHeader(withHeader(semif, "x-api-key", ""), "authorization", "Bearer nope-nope-nope"), status: 401, code: "unauthorized"},
		{name: "unknown path", ev: withPath(semif, "POST", "/v1/nothing"), status: 404, code: "not_found"},
		{name: "wrong method", ev: loadEvent(t, "httpapi-get.json"), status: 405, code: "method_not_allowed",
			check: func(t *testing.T, resp events.APIGatewayV2HTTPResponse, _ map[string]any) {
				require.Equal(t, "POST", resp.Headers["Allow"])
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := invoke(t, b.h, tc.ev)
			require.Equal(t, tc.status, resp.StatusCode, resp.Body)
			require.Equal(t, tc.code, body["code"])
			require.NotEmpty(t, body["message"])
			require.NotContains(t, resp.Body, "goroutine")
			require.NotContains(t, resp.Body, ".go:")
			if tc.check != nil {
				tc.check(t, resp, body)
			}
		})
	}
	require.Empty(t, drain(t, b.cpu), "no error enqueues anything")
	require.Empty(t, drain(t, b.gpu))
}

func TestPolicyRefusalIsForbiddenAndEnqueuesNothing(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse([]byte("authorization:\n  mode: refuse\n  unlisted: refuse\n  callers:\n    - tenant: acme\n      options: [billing, account_access]\n"))
	require.NoError(t, err)
	b := setup(t, func(c *lambda.Config) {
		c.AuthorizeFunc = lambda.PolicyAuthorizer(func() *policy.Policy { return pol })
	})

	// acme may not receive "sales": refused, 403, nothing enqueued.
	resp, body := invoke(t, b.h, loadEvent(t, "httpapi-semif.json"))
	require.Equal(t, http.StatusForbidden, resp.StatusCode, resp.Body)
	require.Equal(t, "forbidden", body["code"])
	require.Contains(t, body["message"], "support-route")

	// globex is not listed at all.
	ev := loadEvent(t, "httpapi-semif.json")
	ev.Headers["x-api-key"] = "other-key-987654321"
	resp, _ = invoke(t, b.h, ev)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, drain(t, b.cpu))

	// A request within acme's options passes.
	ev = loadEvent(t, "httpapi-semif.json")
	ev.Body = `{"state": "s", "question": "q?", "options": [{"id": "billing", "description": ""}, {"id": "account_access", "description": ""}]}`
	resp, _ = invoke(t, b.h, ev)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Len(t, drain(t, b.cpu), 1)
}

func TestPolicyFilterRemovesOptions(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse([]byte("authorization:\n  mode: filter\n  unlisted: refuse\n  callers:\n    - tenant: acme\n      options: [billing, account_access]\n"))
	require.NoError(t, err)
	b := setup(t, func(c *lambda.Config) {
		c.AuthorizeFunc = lambda.PolicyAuthorizer(func() *policy.Policy { return pol })
	})
	resp, _ := invoke(t, b.h, loadEvent(t, "httpapi-semif.json"))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	envs := drain(t, b.cpu)
	require.Len(t, envs, 1)
	require.Equal(t, []string{"account_access", "billing"}, envs[0].Decisions[0].OptionIDs())
}

func TestQueueFailureIs503WithRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *lambda.Config) { c.RetryAfter = 3 * time.Second })
	require.NoError(t, b.cpu.Close()) // a closed queue fails every Send
	resp, body := invoke(t, b.h, loadEvent(t, "httpapi-semif.json"))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "3", resp.Headers["Retry-After"])
	require.Equal(t, "unavailable", body["code"])
	require.NotContains(t, resp.Body, "sqlite")
	require.NotContains(t, resp.Body, "closed")
}

// A request is recorded only once it is queued: one answered 503 must not
// be reported as queued by the results store.
func TestRequestRecordedOnlyAfterEnqueue(t *testing.T) {
	t.Parallel()
	rec := &recordingStore{}
	b := setup(t, func(c *lambda.Config) { c.Results = rec })
	require.NoError(t, b.cpu.Close()) // a closed queue fails every Send
	resp, _ := invoke(t, b.h, loadEvent(t, "httpapi-semif.json"))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Empty(t, rec.accepted, "a request answered 503 is not recorded")

	// A failing record does not undo what is queued: the answer stays 202.
	b = setup(t, func(c *lambda.Config) { c.Results = &recordingStore{fail: errors.New("disk full")} })
	resp, body := invoke(t, b.h, loadEvent(t, "httpapi-semif.json"))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	envs := drain(t, b.cpu)
	require.Len(t, envs, 1)
	require.Equal(t, body["request_id"], envs[0].RequestID)
}

// recordingStore is a results store that only remembers what it was
// asked to accept, or fails (a fake: the real stores are tested in
// internal/results).
type recordingStore struct {
	results.Store
	mu       sync.Mutex
	accepted []results.Accepted
	fail     error
}

func (s *recordingStore) Accept(_ context.Context, a results.Accepted) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.accepted = append(s.accepted, a)
	return nil
}

func TestIdempotencyKeyEnqueuesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ev := loadEvent(t, "httpapi-semif.json")
	_, first := invoke(t, b.h, ev)
	_, second := invoke(t, b.h, ev)
	require.Equal(t, first["request_id"], second["request_id"], "a retry gets the same request id")
	require.Len(t, drain(t, b.cpu), 1, "and is not enqueued twice")

	// Another key is another request.
	ev.Headers = map[string]string{"content-type": "application/json", "x-api-key": testKey, "idempotency-key": "another"}
	_, third := invoke(t, b.h, ev)
	require.NotEqual(t, first["request_id"], third["request_id"])
	require.Len(t, drain(t, b.cpu), 1)

	// Without a key, two identical bodies are two requests: each gets its
	// own id and its own message, so each id's results arrive.
	delete(ev.Headers, "idempotency-key")
	_, k1 := invoke(t, b.h, ev)
	_, k2 := invoke(t, b.h, ev)
	require.NotEqual(t, k1["request_id"], k2["request_id"])
	envs := drain(t, b.cpu)
	require.Len(t, envs, 2)
	ids := map[string]bool{}
	for _, env := range envs {
		ids[env.RequestID] = true
	}
	require.True(t, ids[k1["request_id"].(string)] && ids[k2["request_id"].(string)], "every accepted id is enqueued")

	// The same key from another tenant is not the same request.
	ev.Headers["idempotency-key"] = "fixture-semif-1"
	ev.Headers["x-api-key"] = "other-key-987654321"
	_, fourth := invoke(t, b.h, ev)
	require.NotEqual(t, first["request_id"], fourth["request_id"])
	require.Len(t, drain(t, b.cpu), 1)
}

func TestBatchGroupsByStateAndRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	opts := `[{"id": "yes", "description": "Yes."}, {"id": "no", "description": "No."}]`
	body := fmt.Sprintf(`{"decisions": [
		{"id": "a", "state": "one", "question": "q1?", "options": %[1]s},
		{"state": {"b": 1, "a": 2}, "question": "q2?", "options": %[1]s},
		{"id": "c", "state": "one", "question": "q3?", "options": %[1]s},
		{"id": "d", "state": {"a": 2, "b": 1}, "question": "q4?", "options": %[1]s, "route": "gpu"}
	]}`, opts)
	ev := loadEvent(t, "httpapi-semif.json")
	ev.Body = body
	resp, out := invoke(t, b.h, ev)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Equal(t, []any{"a", "1", "c", "d"}, out["decision_ids"])
	require.Equal(t, "mixed", out["route"])
	require.EqualValues(t, 2, out["messages"])

	cpu, gpu := drain(t, b.cpu), drain(t, b.gpu)
	require.Len(t, cpu, 1)
	require.Len(t, gpu, 1)
	require.Equal(t, []string{"a", "c"}, ids(cpu[0].Decisions))
	require.Equal(t, []string{"1", "d"}, ids(gpu[0].Decisions), "JSON states group after canonicalisation")
	require.Equal(t, cpu[0].RequestID, gpu[0].RequestID)
}

func TestOneQueueOnly(t *testing.T) {
	t.Parallel()
	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(tempDir(t), "q.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	h, err := lambda.New(lambda.Config{Queues: map[decision.Route]queue.Sender{decision.RouteCPU: q}, AllowAnonymous: true})
	require.NoError(t, err)
	ev := loadEvent(t, "httpapi-no-key.json")
	ev.Body = `{"state": "s", "question": "q?", "route": "gpu", "options": [{"id": "a", "description": ""}, {"id": "b", "description": ""}]}`
	resp, body := invoke(t, h, ev)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, resp.Body)
	require.Equal(t, "cpu", body["route"], "the only queue takes everything")
	require.Equal(t, []any{"0"}, body["decision_ids"], "a bare decision without id is decision 0")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := lambda.New(lambda.Config{})
	require.ErrorIs(t, err, lambda.ErrConfig)
	require.ErrorContains(t, err, "Queues")
	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(tempDir(t), "q.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	_, err = lambda.New(lambda.Config{Queues: map[decision.Route]queue.Sender{"tpu": q}, APIKeys: map[string]string{" ": "t"}, MaxBodyBytes: -1})
	require.ErrorContains(t, err, `route "tpu"`)
	require.ErrorContains(t, err, `key of tenant "t" is empty`)
	require.ErrorContains(t, err, "MaxBodyBytes")
	_, err = lambda.New(lambda.Config{Queues: map[decision.Route]queue.Sender{decision.RouteCPU: q, decision.RouteGPU: q}})
	require.ErrorContains(t, err, "Router")
}

func TestLoadEnv(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	e, err := lambda.LoadEnv(env(map[string]string{
		"VERDICT_CPU_QUEUE_URL":       "https://sqs.us-east-1.amazonaws.com/1/cpu.fifo",
		"VERDICT_API_KEYS":            "acme-key-0123456789=acme, globex-key-0123=globex,c2VjcmV0==,anon-key",
		"VERDICT_RETRY_AFTER":         "5s",
		"VERDICT_GPU_TOKEN_THRESHOLD": "4096",
		"VERDICT_TRUST_AUTHORIZER":    "false",
	}))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"acme-key-0123456789": "acme", "globex-key-0123": "globex", "c2VjcmV0==": "", "anon-key": ""}, e.APIKeys)
	require.Equal(t, 5*time.Second, e.RetryAfter)
	require.Equal(t, 4096, e.GPUTokenThreshold)
	require.False(t, e.TrustAuthorizer)

	_, err = lambda.LoadEnv(env(map[string]string{
		"VERDICT_GPU_QUEUE_URL":   "sqs://nope",
		"VERDICT_API_KEYS":        "secretvalue1=acme,secret value2",
		"VERDICT_RETRY_AFTER":     "soon",
		"VERDICT_MAX_BODY_BYTES":  "-4",
		"VERDICT_ALLOW_ANONYMOUS": "perhaps",
	}))
	require.ErrorIs(t, err, lambda.ErrConfig)
	for _, name := range []string{"VERDICT_GPU_QUEUE_URL", "VERDICT_API_KEYS: entry 2", "VERDICT_RETRY_AFTER", "VERDICT_MAX_BODY_BYTES", "VERDICT_ALLOW_ANONYMOUS"} {
		require.ErrorContains(t, err, name)
	}
	require.NotContains(t, err.Error(), "secretvalue1")

	_, err = lambda.LoadEnv(env(nil))
	require.ErrorContains(t, err, "VERDICT_CPU_QUEUE_URL")
}

func TestServeHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *lambda.Config) { c.MaxBodyBytes = 2048 })
	srv := newLocalServer(t, b.h)
	post := func(body string, hdr map[string]string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, srv+"/v1/decisions", strings.NewReader(body))
		require.NoError(t, err)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	ok := `{"state": "s", "question": "q?", "options": [{"id": "a", "description": ""}, {"id": "b", "description": ""}]}`
	resp := post(ok, map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + testKey})
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var acc lambda.Accepted
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&acc))
	require.Equal(t, []string{"0"}, acc.DecisionIDs)

	resp = post(`{"state": "`+strings.Repeat("x", 4096)+`"}`, map[string]string{"Content-Type": "application/json", "X-Api-Key": testKey})
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Len(t, drain(t, b.cpu), 1)
}

func ids(ds []decision.Decision) []string {
	out := make([]string, len(ds))
	for i := range ds {
		out[i] = ds[i].ID
	}
	return out
}

// FuzzHandle feeds arbitrary bodies to both routes: the handler never
// panics, answers a known status with a JSON body, and enqueues only what
// it accepted.
func FuzzHandle(f *testing.F) {
	for _, name := range []string{"httpapi-semif.json", "httpapi-systemone.json", "httpapi-invalid.json", "httpapi-malformed.json"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			f.Fatal(err)
		}
		f.Add(ev.Body, ev.RawPath == lambda.PathSystemOneAsync)
	}
	f.Add(`{"decisions": []}`, false)
	f.Add(`{"questions": {}}`, true)
	f.Add(`[]`, true)
	f.Add(`{"decision": {"state": {"a": [1, 2]}, "question": "q", "options": [{"id": "x", "description": ""}, {"id": "x", "description": ""}]}}`, false)
	b := setup(f) // one pair of queues per fuzzing process, drained after every input
	f.Fuzz(func(t *testing.T, body string, systemOne bool) {
		path := lambda.PathDecisions
		if systemOne {
			path = lambda.PathSystemOneAsync
		}
		resp := b.h.Handle(context.Background(), &lambda.Request{Method: "POST", Path: path,
			Header: http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {testKey}}, Body: []byte(body)})
		switch resp.Status {
		case 202, 400, 413, 422:
		default:
			t.Fatalf("status %d for %q: %s", resp.Status, body, resp.Body)
		}
		require.True(t, json.Valid(resp.Body))
		n := len(drain(t, b.cpu)) + len(drain(t, b.gpu))
		if resp.Status == 202 {
			require.Positive(t, n)
		} else {
			require.Zero(t, n)
			require.False(t, bytes.Contains(resp.Body, []byte("panic")))
		}
	})
}
