package policy_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

// ticketPolicy is a small valid policy shared by the tests.
const ticketPolicy = `
version: 1
kinds:
  support-route:
    match:
      - id: '^ticket-'
      - question: '(?i)which team'
    options: [billing, technical, account, other]
    min_probability: 0.6
    min_margin: 0.1
    option_min:
      account: 0.8
    rules:
      - name: chargeback
        when: 'state.lowerAscii().contains("chargeback")'
        option: billing
      - name: enterprise-outage
        when: 'is_json && has(json.plan) && json.plan == "enterprise" && has(json.outage) && json.outage'
        option: technical
      - name: legal
        when: 'metadata.?channel.orValue("") == "legal" || ("team" in caller && caller["team"] == "legal")'
        option: account
    fallback: review
    on_error: review
`

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error, each must appear
	}{
		{
			name: "unknown rule option",
			yaml: `
kinds:
  support-route:
    options: [billing, technical, other]
    rules:
      - {when: 'true', option: billing}
      - {when: 'true', option: technical}
      - {when: 'true', option: refund}
`,
			want: []string{`kinds.support-route.rules[2].option: unknown option "refund"`, "(line 8)"},
		},
		{name: "empty", yaml: "", want: []string{"policy is empty"}},
		{name: "comment only", yaml: "# nothing\n", want: []string{"policy is empty"}},
		{name: "not yaml", yaml: "kinds: [\n", want: []string{"not valid YAML"}},
		{name: "top not mapping", yaml: "- a\n- b\n", want: []string{"must be a mapping, got a list"}},
		{name: "two documents", yaml: "version: 1\n---\nversion: 1\n", want: []string{"single YAML document"}},
		{name: "unknown top field", yaml: "kind: {}\n", want: []string{`kind: unknown field "kind"`}},
		{name: "bad version", yaml: "version: 2\n", want: []string{"version: must be in [1, 1]"}},
		{name: "duplicate key", yaml: "version: 1\nversion: 1\n", want: []string{"version: duplicate key"}},
		{name: "temperature zero", yaml: "temperature: 0\n", want: []string{"temperature: must be in (0, 100]"}},
		{name: "temperature string", yaml: "temperature: '1'\n", want: []string{"temperature: must be a number, got a string"}},
		{name: "temperature nan", yaml: "temperature: .nan\n", want: []string{"temperature: must be a finite number"}},
		{name: "debias too many", yaml: "kinds: {k: {debias: 300}}\n", want: []string{"kinds.k.debias: must be in [0, 255]"}},
		{name: "cost limit", yaml: "rule_cost_limit: 0\n", want: []string{"rule_cost_limit: must be in [1,"}},
		{name: "unknown_kind", yaml: "unknown_kind: maybe\n", want: []string{`unknown_kind: must be "default" or "refuse"`}},
		{name: "default_kind unknown", yaml: "default_kind: nope\nkinds: {a: {}}\n", want: []string{`default_kind: unknown kind "nope" (kinds: a)`}},
		{name: "kind not mapping", yaml: "kinds: {a: 3}\n", want: []string{"kinds.a: must be a mapping, got a number"}},
		{name: "kind name", yaml: "kinds: {' a': {}}\n", want: []string{"kinds. a: kind name must not start or end with whitespace"}},
		{name: "unknown kind field", yaml: "kinds: {a: {min_prob: 0.5}}\n", want: []string{`kinds.a.min_prob: unknown field "min_prob"`}},
		{name: "min_probability range", yaml: "kinds: {a: {min_probability: 1.5}}\n", want: []string{"kinds.a.min_probability: must be in [0, 1], got 1.5"}},
		{name: "min_margin negative", yaml: "kinds: {a: {min_margin: -0.1}}\n", want: []string{"kinds.a.min_margin: must be in [0, 1]"}},
		{name: "option_min unknown", yaml: "kinds: {a: {options: [x, y], option_min: {z: 0.5}}}\n", want: []string{`kinds.a.option_min.z: unknown option "z"`}},
		{name: "option_min value", yaml: "kinds: {a: {option_min: {z: high}}}\n", want: []string{"kinds.a.option_min.z: must be a number, got a string"}},
		{name: "options empty", yaml: "kinds: {a: {options: []}}\n", want: []string{"kinds.a.options: must not be empty"}},
		{name: "options duplicate", yaml: "kinds: {a: {options: [x, x]}}\n", want: []string{`kinds.a.options[1]: duplicate "x" (also kinds.a.options[0])`}},
		{name: "rule does not compile", yaml: "kinds: {a: {rules: [{when: 'state.contains(', option: x}]}}\n", want: []string{"kinds.a.rules[0].when: does not compile: 1:"}},
		{name: "rule not bool", yaml: "kinds: {a: {rules: [{when: 'size(state)', option: x}]}}\n", want: []string{"kinds.a.rules[0].when: must be a boolean expression, has type int"}},
		{name: "rule unknown variable", yaml: "kinds: {a: {rules: [{when: 'body == \"x\"', option: x}]}}\n", want: []string{"kinds.a.rules[0].when: does not compile", "undeclared reference to 'body'"}},
		{name: "rule missing fields", yaml: "kinds: {a: {rules: [{name: r}]}}\n", want: []string{"kinds.a.rules[0].when: is required", "kinds.a.rules[0].option: is required"}},
		{name: "rule duplicate name", yaml: "kinds: {a: {rules: [{name: r, when: 'true', option: x}, {name: r, when: 'true', option: x}]}}\n", want: []string{`kinds.a.rules[1].name: duplicate rule name "r"`}},
		{name: "rule unknown field", yaml: "kinds: {a: {rules: [{if: 'true', option: x}]}}\n", want: []string{`kinds.a.rules[0].if: unknown field "if"`}},
		{name: "fallback bare option", yaml: "kinds: {a: {options: [x, y], fallback: x}}\n", want: []string{`kinds.a.fallback: must be "abstain", "review" or {option: ID}, got "x" (to return an option, write {option: x})`}},
		{name: "fallback error", yaml: "kinds: {a: {fallback: error}}\n", want: []string{`kinds.a.fallback: must be "abstain", "review" or {option: ID}`}},
		{name: "fallback unknown option", yaml: "kinds: {a: {options: [x, y], fallback: {option: z}}}\n", want: []string{`kinds.a.fallback.option: unknown option "z"`}},
		{name: "on_error bad", yaml: "kinds: {a: {on_error: retry}}\n", want: []string{`kinds.a.on_error: must be "error", "abstain", "review" or {option: ID}, got "retry"`}},
		{name: "match bad regexp", yaml: "kinds: {a: {match: [{id: '('}]}}\n", want: []string{"kinds.a.match[0].id: bad pattern: missing closing )"}},
		{name: "match empty", yaml: "kinds: {a: {match: [{}]}}\n", want: []string{`kinds.a.match[0]: must set "id" or "question"`}},
		{name: "alias", yaml: "kinds:\n  a: &k {min_probability: 0.5}\n  b: *k\n", want: []string{"kinds.b: aliases are not supported"}},
		{name: "auth unknown field", yaml: "authorization: {tenants: []}\n", want: []string{`authorization.tenants: unknown field "tenants"`}},
		{name: "auth mode", yaml: "authorization: {mode: drop}\n", want: []string{`authorization.mode: must be "filter" or "refuse", got "drop"`}},
		{name: "auth unlisted", yaml: "authorization: {unlisted: maybe}\n", want: []string{`authorization.unlisted: must be "allow", "refuse" or a mapping`}},
		{name: "caller without identity", yaml: "authorization: {callers: [{kinds: [default]}]}\n", want: []string{"authorization.callers[0]: must set tenant, api_key or api_key_sha256"}},
		{name: "caller unknown kind", yaml: "authorization: {callers: [{tenant: t, kinds: [nope]}]}\n", want: []string{`authorization.callers[0].kinds[0]: unknown kind "nope"`}},
		{name: "caller unknown option", yaml: "kinds: {a: {options: [x, y]}}\nauthorization: {callers: [{tenant: t, kinds: [a], options: [x, refund]}]}\n", want: []string{`authorization.callers[0].options[1]: unknown option "refund"`}},
		{name: "caller bad hash", yaml: "authorization: {callers: [{api_key_sha256: abc}]}\n", want: []string{"authorization.callers[0].api_key_sha256: must be 64 hex digits"}},
		{name: "caller short key", yaml: "authorization: {callers: [{api_key: abc}]}\n", want: []string{"authorization.callers[0].api_key: must be at least 8 characters"}},
		{name: "caller duplicate", yaml: "authorization: {callers: [{tenant: t}, {tenant: t}]}\n", want: []string{"authorization.callers[1]: matches the same callers as authorization.callers[0]"}},
		{name: "caller mode", yaml: "authorization: {callers: [{tenant: t, mode: block}]}\n", want: []string{`authorization.callers[0].mode: must be "filter" or "refuse"`}},
		{name: "unlisted with tenant", yaml: "authorization: {unlisted: {tenant: t}}\n", want: []string{`authorization.unlisted.tenant: unknown field "tenant"`}},
		{
			name: "every problem reported",
			yaml: "version: 3\nkinds: {a: {min_probability: 2, fallback: nope}}\n",
			want: []string{"version:", "kinds.a.min_probability:", "kinds.a.fallback:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := policy.Parse([]byte(tt.yaml))
			require.Error(t, err)
			require.Nil(t, p)
			require.ErrorIs(t, err, policy.ErrInvalid)
			var le *policy.LoadError
			require.ErrorAs(t, err, &le)
			require.NotEmpty(t, le.Errors)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestParseValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		yaml  string
		kinds []string
	}{
		{name: "ticket policy", yaml: ticketPolicy, kinds: []string{"default", "support-route"}},
		{name: "version only", yaml: "version: 1\n", kinds: []string{"default"}},
		{name: "named default kind", yaml: "default_kind: main\nkinds: {main: {min_probability: 0.5}}\n", kinds: []string{"main"}},
		{name: "numeric option ids", yaml: "kinds: {score: {options: [0, 1, 2], option_min: {2: 0.9}, rules: [{when: 'true', option: 1}]}}\n", kinds: []string{"default", "score"}},
		{name: "fallback option mapping", yaml: "kinds: {a: {options: [x, y], fallback: {option: y}, on_error: {option: x}}}\n", kinds: []string{"a", "default"}},
		{name: "single match mapping", yaml: "kinds: {a: {match: {id: '^a-', question: 'x'}}}\n", kinds: []string{"a", "default"}},
		{name: "unlisted grant", yaml: "kinds: {a: {}}\nauthorization: {unlisted: {kinds: [a], options: [x, y], mode: refuse}}\n", kinds: []string{"a", "default"}},
		{name: "api key literal", yaml: "authorization: {callers: [{name: ci, api_key: secret-key-1}, {tenant: t, api_key: secret-key-1}]}\n", kinds: []string{"default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := policy.Parse([]byte(tt.yaml))
			require.NoError(t, err)
			require.Len(t, p.Version(), 64)
			require.Equal(t, tt.kinds, p.Kinds())
		})
	}
}

func TestVersionIsFileHash(t *testing.T) {
	t.Parallel()
	a, err := policy.Parse([]byte("version: 1\n"))
	require.NoError(t, err)
	b, err := policy.Parse([]byte("version: 1\n"))
	require.NoError(t, err)
	c, err := policy.Parse([]byte("version: 1 # changed\n"))
	require.NoError(t, err)
	require.Equal(t, a.Version(), b.Version())
	require.NotEqual(t, a.Version(), c.Version())
	require.Equal(t, "default", policy.Default().Version())
	var nilPolicy *policy.Policy
	require.Equal(t, "none", nilPolicy.Version())
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	_, err := policy.Load(filepath.Join(dir, "missing.yaml"))
	require.ErrorIs(t, err, policy.ErrRead)

	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, []byte("# "+strings.Repeat("x", policy.MaxFileBytes)+"\n"), 0o600))
	_, err = policy.Load(big)
	require.ErrorIs(t, err, policy.ErrInvalid)
	require.Contains(t, err.Error(), "limit is")

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("kinds: {a: {min_probability: 7}}\n"), 0o600))
	_, err = policy.Load(bad)
	var le *policy.LoadError
	require.True(t, errors.As(err, &le))
	require.Equal(t, bad, le.File)
	require.Contains(t, err.Error(), bad+": kinds.a.min_probability: must be in [0, 1], got 7 (line 1)")
}

func TestExampleFileLoads(t *testing.T) {
	t.Parallel()
	p, err := policy.Load("../examples/policy.yaml")
	require.NoError(t, err)
	require.Equal(t, []string{"default", "sentiment", "support-route"}, p.Kinds())

	opts := []string{"billing", "technical", "account", "abuse", "other"}
	plan := p.Before(newDecision("ticket-7", "My card shows a CHARGEBACK", opts...), policy.Caller{})
	require.NotNil(t, plan.Outcome)
	require.Equal(t, "billing", plan.Outcome.Chosen)

	// The rules read optional keys safely: a plain ticket goes to the model.
	plan = p.Before(newDecision("ticket-8", "The app crashes", opts...), policy.Caller{})
	require.Nil(t, plan.Outcome)
	plan = p.Before(newDecision("ticket-8", `{"plan":"enterprise","text":"total outage"}`, opts...), policy.Caller{})
	require.Equal(t, "technical", plan.Outcome.Chosen)

	plan = p.Before(newDecision("ticket-9", "hello", opts...), policy.Caller{Tenant: "acme"})
	require.Nil(t, plan.Outcome)
	require.Equal(t, []string{"abuse"}, plan.Removed)

	plan = p.Before(newDecision("ticket-9", "hello", opts...), policy.Caller{Tenant: "partner"})
	require.Equal(t, decision.StatusRefused, plan.Outcome.Status)
}
