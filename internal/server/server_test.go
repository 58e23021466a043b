package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/auth"
	"github.com/verdict-dev/verdict/internal/server"
)

func TestPingLoadingThenReady(t *testing.T) {
	t.Parallel()
	srv, err := server.New(server.Config{})
	require.NoError(t, err)
	url := listen(t, srv)

	r := do(t, "GET", url+"/ping", nil)
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.Equal(t, map[string]any{"error": "model is loading; retry the request", "retryable": true}, r.json(t))

	// Scoring routes say the same while loading.
	r = do(t, "POST", url+"/invocations", []byte(semIfBare))
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.NotEmpty(t, r.header.Get("Retry-After"))

	srv.SetScorer(&fakeScorer{}, decision.ModelIdentity{File: "/opt/ml/model/tiny.gguf"})
	r = do(t, "GET", url+"/ping", nil)
	require.Equal(t, http.StatusOK, r.status)
	r = do(t, "HEAD", url+"/ping", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "tiny", srv.ModelName())
}

func TestInvocationsEachShape(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	for _, path := range []string{"/invocations", "/endpoints/local/invocations"} {
		// bare
		r := do(t, "POST", b.url+path, []byte(semIfBare))
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		res := r.json(t)["result"].(map[string]any)
		require.Equal(t, "support-route", res["id"])
		require.Equal(t, []any{"account_access", "billing", "sales"}, res["option_ids"])
		requireProbabilities(t, res["probabilities"], 3)
		require.Len(t, res["option_logits"], 3)
		require.NotEmpty(t, res["prompt_sha256"])

		// wrapped
		r = do(t, "POST", b.url+path, []byte(`{"decision":`+semIfBare+`}`))
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		require.Contains(t, r.json(t), "result")
		require.NotContains(t, r.json(t), "results")

		// batch: order kept, missing ids numbered
		batch := `{"decisions":[` + semIfBare + `,{"state":"x","question":"Yes?","options":[{"id":"yes","description":"y"},{"id":"no","description":"n"}]}]}`
		r = do(t, "POST", b.url+path, []byte(batch))
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		results := r.json(t)["results"].([]any)
		require.Len(t, results, 2)
		require.Equal(t, "support-route", results[0].(map[string]any)["id"])
		require.Equal(t, "1", results[1].(map[string]any)["id"])
		requireProbabilities(t, results[1].(map[string]any)["probabilities"], 2)

		// System One body, detected
		r = do(t, "POST", b.url+path, []byte(systemOneAll))
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		m := r.json(t)
		require.Contains(t, m, "answers")
		require.Equal(t, "tiny-test", m["model"])
	}
	// One Score call per request: decisions sharing a state go together.
	b.scorer.mu.Lock()
	defer b.scorer.mu.Unlock()
	require.Len(t, b.scorer.seen[len(b.scorer.seen)-1], 3)
}

func requireProbabilities(t *testing.T, v any, n int) {
	t.Helper()
	ps, ok := v.([]any)
	require.True(t, ok, "probabilities: %v", v)
	require.Len(t, ps, n)
	sum := 0.0
	for _, p := range ps {
		sum += p.(float64)
	}
	require.InDelta(t, 1, sum, 1e-9)
}

// numbers decodes body keeping number literals, to check float syntax.
func numbers(t *testing.T, body []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m), "%s", body)
	return m
}

// requireFloat checks that a JSON number literal reads as a float for a
// strict client (has a decimal point or an exponent) and returns it.
func requireFloat(t *testing.T, v any) float64 {
	t.Helper()
	n, ok := v.(json.Number)
	require.True(t, ok, "want a number, got %T %v", v, v)
	require.True(t, strings.ContainsAny(n.String(), ".eE"), "number %s has no decimal point", n)
	f, err := n.Float64()
	require.NoError(t, err)
	return f
}

func TestSystemOneNoulChoiceScore(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	r := do(t, "POST", b.url+"/v1/systemone", []byte(systemOneAll))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Regexp(t, `^req_[0-9a-f]{24}$`, r.header.Get("x-typesafe-request-id"))
	require.Equal(t, "application/json", r.header.Get("Content-Type"))

	m := numbers(t, r.body)
	require.Equal(t, "tiny-test", m["model"], "model reports what answered, not the alias asked for")
	// Answers keep the question order of the request.
	require.True(t, bytes.Index(r.body, []byte(`"is_billing"`)) < bytes.Index(r.body, []byte(`"queue"`)))
	require.True(t, bytes.Index(r.body, []byte(`"queue"`)) < bytes.Index(r.body, []byte(`"urgency"`)))
	answers := m["answers"].(map[string]any)
	require.Len(t, answers, 3)

	noul := answers["is_billing"].(map[string]any)
	require.Equal(t, "noul", noul["type"])
	p := requireFloat(t, noul["noul"])
	require.True(t, p >= 0 && p <= 1)
	require.NotContains(t, noul, "confidence")

	choice := answers["queue"].(map[string]any)
	require.Equal(t, "choice", choice["type"])
	probs := choice["probabilities"].(map[string]any)
	require.Len(t, probs, 3)
	var ps []float64
	best, bestP := "", -1.0
	for _, id := range []string{"billing", "tech", "sales"} {
		f := requireFloat(t, probs[id])
		ps = append(ps, f)
		if f > bestP {
			best, bestP = id, f
		}
	}
	require.Equal(t, best, choice["choice"])
	wantConf := math.Min(1, math.Max(0, (3*bestP-1)/2))
	require.InDelta(t, wantConf, requireFloat(t, choice["confidence"]), 1e-12)
	require.InDelta(t, decision.Confidence(ps), wantConf, 1e-12)
	require.Contains(t, choice, "verdict")

	score := answers["urgency"].(map[string]any)
	require.Equal(t, "score", score["type"])
	legend := score["legend"].(map[string]any)
	require.Equal(t, map[string]any{"0": "Not urgent.", "1": "Somewhat urgent.", "2": "Urgent."}, legend)
	require.Contains(t, string(r.body), `"legend":{"0":"Not urgent.","1":"Somewhat urgent.","2":"Urgent."}`)
	sp := score["probabilities"].(map[string]any)
	exp, pmax := 0.0, 0.0
	for i := range 3 {
		f := requireFloat(t, sp[strconv.Itoa(i)])
		exp += float64(i) * f
		pmax = math.Max(pmax, f)
	}
	require.InDelta(t, exp, requireFloat(t, score["score"]), 1e-12)
	require.InDelta(t, math.Min(1, math.Max(0, (3*pmax-1)/2)), requireFloat(t, score["confidence"]), 1e-12)

	usage := m["usage"].(map[string]any)
	in, err := usage["input_tokens"].(json.Number).Int64()
	require.NoError(t, err)
	require.Positive(t, in)
	require.Equal(t, json.Number("0"), usage["output_tokens"], "usage counts are integers")
}

// oneHotScorer puts all the mass on the first option, so that formatted
// probabilities are exactly 1 and 0: they must still be written 1.0 and 0.0.
type oneHotFakeScorer struct{}

func (oneHotFakeScorer) Score(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
	out := make([]decision.Result, len(ds))
	for i := range ds {
		logits := make([]float64, len(ds[i].Options))
		logits[0] = 1000
		engine.Readout(&out[i], &ds[i], logits, 1)
	}
	return out, nil
}

func TestSystemOneWholeNumbersAreFloats(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{Scorer: oneHotFakeScorer{}})
	r := do(t, "POST", b.url+"/v1/systemone", []byte(systemOneAll))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	body := string(r.body)
	require.Contains(t, body, `"noul":1.0`)
	require.Contains(t, body, `"probabilities":{"billing":1.0,"tech":0.0,"sales":0.0},"confidence":1.0`)
	require.Contains(t, body, `"score":0.0`)
	require.Contains(t, body, `"usage":{"input_tokens":0,"output_tokens":0}`)
}

func TestSystemOneModels(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	for _, name := range []string{"jev-latest", "jev-preview", "jev-1.13.0", "tiny-test", "tiny-test.gguf", ""} {
		body := strings.Replace(systemOneAll, `"jev-latest"`, strconv.Quote(name), 1)
		r := do(t, "POST", b.url+"/v1/systemone", []byte(body))
		require.Equal(t, http.StatusOK, r.status, "model %q: %s", name, r.body)
		require.Equal(t, "tiny-test", r.json(t)["model"])
	}
	r := do(t, "POST", b.url+"/v1/systemone", []byte(strings.Replace(systemOneAll, "jev-latest", "gpt-9", 1)))
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "model_not_found", r.json(t)["code"])

	// Aliases are configurable: none accepted.
	none := setup(t, server.Config{Aliases: []string{}, ModelName: "router-v2"})
	r = do(t, "POST", none.url+"/v1/systemone", []byte(systemOneAll))
	require.Equal(t, http.StatusNotFound, r.status)
	r = do(t, "POST", none.url+"/v1/systemone", []byte(strings.Replace(systemOneAll, "jev-latest", "router-v2", 1)))
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "router-v2", r.json(t)["model"])

	r = do(t, "GET", b.url+"/v1/models", nil)
	require.Equal(t, http.StatusOK, r.status)
	m := r.json(t)
	data := m["models"].([]any)
	require.Len(t, data, 5)
	first := data[0].(map[string]any)
	require.Equal(t, "tiny-test", first["name"])
	require.NotEmpty(t, first["description"])
	_, err := time.Parse(time.RFC3339, first["release_date"].(string))
	require.NoError(t, err)
	require.Equal(t, true, first["ready"])
	require.Equal(t, "/models/tiny-test.gguf", first["verdict"].(map[string]any)["file"])
	require.Equal(t, "jev-latest", data[1].(map[string]any)["name"])
	require.Equal(t, "tiny-test", data[1].(map[string]any)["alias_for"])
	require.Equal(t, "default", data[4].(map[string]any)["name"])
}

func TestErrorStatuses(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{MaxBodyBytes: 4096})
	big := `{"state":"` + strings.Repeat("x", 5000) + `","question":"q?","options":[{"id":"a","description":""},{"id":"b","description":""}]}`
	tooMany := `{"model":"jev-latest","state":"s","questions":{"q":{"type":"score","instructions":"i","criteria":["a","b","c","d","e","f","g","h","i","j","k"]}}}`
	cases := []struct {
		name, method, path, body, ctype string
		status                          int
		code                            string
	}{
		{"malformed", "POST", "/invocations", `{"state": `, "application/json", 400, "malformed"},
		{"trailing data", "POST", "/v1/systemone", `{"questions":{}} {}`, "application/json", 400, "malformed"},
		{"wrong method", "GET", "/invocations", "", "", 405, "method_not_allowed"},
		{"wrong method systemone", "PUT", "/v1/systemone", systemOneAll, "application/json", 405, "method_not_allowed"},
		{"body too large", "POST", "/invocations", big, "application/json", 413, "too_large"},
		{"wrong content type", "POST", "/invocations", semIfBare, "text/plain", 415, "unsupported_media_type"},
		{"bad content type", "POST", "/invocations", semIfBare, "application/json; =", 415, "unsupported_media_type"},
		{"unknown field", "POST", "/invocations", `{"state":"s","question":"q?","options":[{"id":"a","description":""},{"id":"b","description":""}],"metdata":{}}`, "application/json", 400, "invalid"},
		{"too many levels", "POST", "/v1/systemone", tooMany, "application/json", 422, "invalid"},
		{"semif on systemone", "POST", "/v1/systemone", semIfBare, "application/json", 422, "invalid"},
		{"unknown type", "POST", "/v1/systemone", `{"state":"s","questions":{"q":{"type":"rank","instructions":"i"}}}`, "application/json", 422, "invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			r := do(t, c.method, b.url+c.path, body, "Content-Type", c.ctype)
			require.Equal(t, c.status, r.status, "%s", r.body)
			require.Equal(t, "application/json", r.header.Get("Content-Type"))
			m := r.json(t)
			require.Equal(t, c.code, m["code"])
			require.NotEmpty(t, m["message"])
			require.Equal(t, r.header.Get("x-typesafe-request-id"), m["request_id"])
			if c.status == 405 {
				require.NotEmpty(t, r.header.Get("Allow"))
			}
			if strings.HasPrefix(c.path, "/v1/") {
				detail := m["detail"].(map[string]any)
				require.NotEmpty(t, detail["error_type"])
				require.Equal(t, m["message"], detail["message"])
			} else {
				require.NotEmpty(t, m["error"])
			}
			if c.status == 422 || c.code == "invalid" {
				fields := m["fields"].([]any)
				require.NotEmpty(t, fields)
				require.NotEmpty(t, fields[0].(map[string]any)["path"])
			}
		})
	}
	// A 422 names the field path.
	r := do(t, "POST", b.url+"/v1/systemone", []byte(tooMany))
	require.Contains(t, string(r.body), `"path":"questions.q.criteria"`)
	// The SageMaker runtime path types its errors for AWS SDKs.
	r = do(t, "POST", b.url+"/endpoints/local/invocations", []byte(`{`))
	require.Equal(t, "ValidationError", r.header.Get("X-Amzn-ErrorType"))
}

func TestAuthBearer(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{APIKeys: map[string]string{"k-alpha": "acme", "k-beta": ""}})
	for _, hdr := range []string{"", "Bearer", "Bearer wrong", "Basic k-alpha", "Bearer k-alph", "Bearer k-alpha2"} {
		r := do(t, "POST", b.url+"/v1/systemone", []byte(systemOneAll), "Authorization", hdr)
		require.Equal(t, http.StatusUnauthorized, r.status, "header %q", hdr)
		require.Equal(t, "unauthorized", r.json(t)["code"])
		require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
	}
	r := do(t, "POST", b.url+"/v1/systemone", []byte(systemOneAll), "Authorization", "Bearer k-alpha")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = do(t, "POST", b.url+"/invocations", []byte(semIfBare), "Authorization", "bearer k-beta")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	// Health checks need no key; everything else does.
	require.Equal(t, http.StatusOK, do(t, "GET", b.url+"/ping", nil).status)
	require.Equal(t, http.StatusUnauthorized, do(t, "GET", b.url+"/metrics", nil).status)
	require.Equal(t, http.StatusUnauthorized, do(t, "GET", b.url+"/v1/models", nil).status)
}

// TestAuthUsesTheAuthPackageRules: serve checks keys by package auth's
// rules (both headers, two different keys refused) and answers 401 with
// its code and message on every route family.
func TestAuthUsesTheAuthPackageRules(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{APIKeys: map[string]string{"k-alpha": "acme"}})
	r := do(t, "POST", b.url+"/invocations", []byte(semIfBare), "X-Api-Key", "k-alpha")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	for path, method := range map[string]string{"/metrics": "GET", "/invocations": "POST", "/v1/systemone": "POST"} {
		r = do(t, method, b.url+path, nil, "Authorization", "Bearer k-alpha", "X-Api-Key", "k-beta")
		require.Equal(t, http.StatusUnauthorized, r.status, path)
		body := r.json(t)
		require.EqualValues(t, auth.Code, body["code"], path)
		require.Equal(t, auth.Message(auth.ErrTwoKeys), body["message"], path)
		require.Equal(t, auth.Challenge, r.header.Get("WWW-Authenticate"))
		r = do(t, method, b.url+path, nil)
		require.Equal(t, auth.Message(auth.ErrNoKey), r.json(t)["message"], path)
	}
	// System One clients also find the hosted service's label.
	r = do(t, "POST", b.url+"/v1/systemone", []byte(systemOneAll), "Authorization", "Bearer wrong")
	require.Equal(t, "authentication_error", r.json(t)["detail"].(map[string]any)["error_type"])
	require.Equal(t, auth.Message(auth.ErrBadKey), r.json(t)["message"])
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  server.Config
		want string
	}{
		{server.Config{MaxBodyBytes: -1}, "MaxBodyBytes"},
		{server.Config{Timeout: -time.Second}, "Timeout"},
		{server.Config{MaxConcurrent: -1}, "MaxConcurrent"},
		{server.Config{MaxQueue: -2}, "MaxQueue"},
		{server.Config{APIKeys: map[string]string{"a b": ""}}, "APIKeys"},
		{server.Config{Aliases: []string{" "}}, "Aliases[0]"},
	} {
		_, err := server.New(c.cfg)
		require.ErrorIs(t, err, server.ErrConfig)
		require.ErrorContains(t, err, c.want)
	}
}

func TestEngineBusyAndErrors(t *testing.T) {
	t.Parallel()
	busy := setup(t, server.Config{Scorer: &fakeScorer{err: engine.ErrBusy}, RetryAfter: 3 * time.Second})
	for _, path := range []string{"/invocations", "/v1/systemone"} {
		body := semIfBare
		if path == "/v1/systemone" {
			body = systemOneAll
		}
		r := do(t, "POST", busy.url+path, []byte(body))
		require.Equal(t, "3", r.header.Get("Retry-After"))
		if path == "/v1/systemone" {
			// System One clients retry 529, the hosted service's "overloaded".
			require.Equal(t, server.StatusOverloaded, r.status)
			require.Equal(t, "overloaded", r.json(t)["code"])
			require.Equal(t, "overloaded_error", r.json(t)["detail"].(map[string]any)["error_type"])
		} else {
			require.Equal(t, http.StatusServiceUnavailable, r.status)
			require.Equal(t, map[string]any{"error": "model is busy; retry the request", "retryable": true}, r.json(t))
		}
	}
	r := do(t, "POST", busy.url+"/endpoints/x/invocations", []byte(semIfBare))
	require.Equal(t, "ServiceUnavailable", r.header.Get("X-Amzn-ErrorType"))

	// A per-decision failure stays in the SemIf result; a System One
	// question has no error shape, so the request fails with its status.
	item := setup(t, server.Config{Scorer: &fakeScorer{itemErr: engine.ErrContextFull}})
	r = do(t, "POST", item.url+"/invocations", []byte(semIfBare))
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "too_large", r.json(t)["result"].(map[string]any)["error"].(map[string]any)["code"])
	r = do(t, "POST", item.url+"/v1/systemone", []byte(systemOneAll))
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	require.Contains(t, r.json(t)["message"], `question "is_billing"`)
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	fs := &fakeScorer{gate: make(chan struct{})} // never opened: every call waits for its context
	b := setup(t, server.Config{Scorer: fs, Timeout: 100 * time.Millisecond})
	r := do(t, "POST", b.url+"/invocations", []byte(semIfBare))
	require.Equal(t, http.StatusGatewayTimeout, r.status)
	require.Equal(t, "timeout", r.json(t)["code"])
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	require.Equal(t, http.StatusOK, do(t, "POST", b.url+"/v1/systemone", []byte(systemOneAll)).status)
	require.Equal(t, http.StatusNotFound, do(t, "GET", b.url+"/nope", nil).status)
	r := do(t, "GET", b.url+"/metrics", nil)
	require.Equal(t, http.StatusOK, r.status)
	text := string(r.body)
	require.Contains(t, text, `verdict_http_requests_total{code="200",route="systemone"} 1`)
	require.Contains(t, text, `verdict_http_requests_total{code="404",route="unknown"} 1`)
	require.Contains(t, text, `verdict_decisions_total{format="systemone"} 3`)
	require.Contains(t, text, "verdict_admission_in_flight 0")
	require.Contains(t, text, "verdict_model_ready 1")
	require.Contains(t, text, "go_goroutines")
}

func TestRequestLogHasNoState(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	logger := newTestLogger(&buf)
	b := setup(t, server.Config{Logger: logger})
	require.Equal(t, http.StatusOK, do(t, "POST", b.url+"/invocations", []byte(semIfBare)).status)
	require.Equal(t, http.StatusOK, do(t, "POST", b.url+"/v1/systemone", []byte(systemOneAll)).status)
	logs := buf.String()
	require.Contains(t, logs, "msg=request")
	require.Contains(t, logs, "decisions=3")
	require.NotContains(t, logs, "forgotten password")
	require.NotContains(t, logs, "charged twice")

	var buf2 syncBuffer
	withState := setup(t, server.Config{Logger: newTestLogger(&buf2), LogState: true})
	require.Equal(t, http.StatusOK, do(t, "POST", withState.url+"/invocations", []byte(semIfBare)).status)
	require.Contains(t, buf2.String(), "forgotten password")
}

// TestAdmissionUnderLoad sends far more concurrent requests than the
// admission bound while the scorer holds every admitted one: the excess is
// shed at once with 503 and Retry-After, every admitted request succeeds
// once the scorer goes on, and the heap does not grow with the load.
func TestAdmissionUnderLoad(t *testing.T) {
	t.Parallel()
	fs := &fakeScorer{gate: make(chan struct{})}
	const concurrent, queue, clients = 2, 3, 40
	b := setup(t, server.Config{Scorer: fs, MaxConcurrent: concurrent, MaxQueue: queue, Logger: discardLogger()})

	round := func() (ok, shed int) {
		calls := fs.calls.Load()
		var wg sync.WaitGroup
		statuses := make(chan response, clients)
		for range clients {
			wg.Go(func() {
				statuses <- do(t, "POST", b.url+"/v1/systemone", []byte(systemOneAll))
			})
		}
		// Wait until the admitted ones are inside, then let them through.
		require.Eventually(t, func() bool {
			return fs.calls.Load()-calls == concurrent && len(statuses) == clients-concurrent-queue
		}, 10*time.Second, 5*time.Millisecond)
		reset := fs.open()
		wg.Wait()
		close(statuses)
		for r := range statuses {
			switch r.status {
			case http.StatusOK:
				ok++
			case server.StatusOverloaded:
				require.Equal(t, "1", r.header.Get("Retry-After"))
				shed++
			default:
				t.Fatalf("unexpected status %d: %s", r.status, r.body)
			}
		}
		reset()
		return ok, shed
	}
	ok, shed := round()
	require.Equal(t, concurrent+queue, ok, "every admitted request succeeds")
	require.Equal(t, clients-concurrent-queue, shed)

	before := heapInUse()
	for range 5 {
		round()
	}
	after := heapInUse()
	t.Logf("heap in use: before %d KiB, after 5 more rounds of %d requests %d KiB", before>>10, clients, after>>10)
	require.Less(t, after, before+32<<20, "heap grew by more than 32 MiB under load")
}

// A client that sends its body too slowly is cut off, so it cannot hold an
// admission slot for long.
func TestSlowBodyTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{Timeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"state\":")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
}

// What the TypeSafe SDK sends by default: model "default" or an alias,
// "instructions": null, null score levels.
func TestSystemOneSDKDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	body := `{"model":"default","state":"A ticket.","questions":{"a":{"type":"noul","instructions":null},"b":{"type":"score","instructions":null,"criteria":["bad",null,"good"]}}}`
	r := do(t, "POST", b.url+"/v1/systemone", []byte(body))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	legend := r.json(t)["answers"].(map[string]any)["b"].(map[string]any)["legend"].(map[string]any)
	require.Equal(t, map[string]any{"0": "bad", "1": nil, "2": "good"}, legend)
}
