package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/server"
	"github.com/verdict-dev/verdict/policy"
)

const testPolicy = `
kinds:
  route:
    options: [account_access, billing, sales]
    rules:
      - {name: chargeback, when: 'state.lowerAscii().contains("chargeback")', option: billing}
`

func TestPolicyOutcomes(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte(testPolicy))
	require.NoError(t, err)
	fs := &fakeScorer{}
	b := setup(t, server.Config{Scorer: fs, Policy: policy.HolderOf(p)})

	// A rule settles the decision without the model.
	body := strings.Replace(semIfBare, `"id":"support-route",`, `"id":"support-route","kind":"route",`, 1)
	ruled := strings.Replace(body, "Customer asks", "Chargeback filed; customer asks", 1)
	r := do(t, "POST", b.url+"/invocations", []byte(ruled))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	res := r.json(t)["result"].(map[string]any)
	require.Equal(t, "billing", res["chosen"])
	out := res["outcome"].(map[string]any)
	require.Equal(t, "rule", out["status"])
	require.Equal(t, "chargeback", out["rule"])
	require.NotContains(t, res, "probabilities")
	require.Zero(t, fs.calls.Load(), "a settled decision is not scored")

	// Otherwise the model decides and the outcome says so.
	r = do(t, "POST", b.url+"/invocations", []byte(body))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	res = r.json(t)["result"].(map[string]any)
	require.Equal(t, "decided", res["outcome"].(map[string]any)["status"])
	requireProbabilities(t, res["probabilities"], 3)
	require.Equal(t, int64(1), fs.calls.Load())

	// System One answers carry the outcome in the verdict block.
	r = do(t, "POST", b.url+"/v1/systemone", []byte(systemOneAll))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	ans := r.json(t)["answers"].(map[string]any)["queue"].(map[string]any)
	require.Equal(t, "decided", ans["verdict"].(map[string]any)["outcome"].(map[string]any)["status"])
	require.NotEmpty(t, ans["choice"])
}

// A caller the policy refuses gets 403 from /v1/systemone (the format has
// no per-answer refusal) and a refused outcome from SemIf; the tenant comes
// from the API key.
func TestPolicyRefusalIs403(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte("authorization: {callers: [{tenant: acme}], unlisted: refuse}\n"))
	require.NoError(t, err)
	fs := &fakeScorer{}
	b := setup(t, server.Config{Scorer: fs, Policy: policy.HolderOf(p),
		APIKeys: map[string]string{"key-acme-1": "acme", "key-other-1": "other"}})

	r := do(t, "POST", b.url+"/v1/systemone", []byte(systemOneAll), "Authorization", "Bearer key-acme-1")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	r = do(t, "POST", b.url+"/v1/systemone", []byte(systemOneAll), "Authorization", "Bearer key-other-1")
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	require.Equal(t, "forbidden", r.json(t)["code"])

	calls := fs.calls.Load()
	r = do(t, "POST", b.url+"/invocations", []byte(semIfBare), "Authorization", "Bearer key-other-1")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	res := r.json(t)["result"].(map[string]any)
	require.Equal(t, "refused", res["outcome"].(map[string]any)["status"])
	require.NotContains(t, res, "chosen")
	require.Equal(t, calls, fs.calls.Load(), "a refused decision is not scored")
}
