package policy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

// A worker sees only the sha256 of the key the front door accepted; it
// must authorize exactly as the front door did with the key itself.
func TestAuthorizeByKeyHash(t *testing.T) {
	t.Parallel()
	key := "s3cret-key"
	sum := sha256.Sum256([]byte(key))
	p := mustParse(t, `
kinds:
  default:
    options: [a, b]
authorization:
  mode: refuse
  unlisted: refuse
  callers:
    - name: bot
      api_key_sha256: `+hex.EncodeToString(sum[:])+`
      kinds: [default]
`)
	d := decision.Decision{ID: "x", State: decision.TextState("s"), Question: "q?",
		Options: []decision.Option{{ID: "a", Description: "A"}, {ID: "b", Description: "B"}}}
	byKey := p.Before(d, policy.Caller{APIKey: key})
	require.Nil(t, byKey.Outcome)
	byHash := p.Before(d, policy.Caller{APIKeySHA256: hex.EncodeToString(sum[:])})
	require.Nil(t, byHash.Outcome)
	wrong := p.Before(d, policy.Caller{APIKeySHA256: hex.EncodeToString(make([]byte, 32))})
	require.NotNil(t, wrong.Outcome)
	require.Equal(t, decision.StatusRefused, wrong.Outcome.Status)
	garbage := p.Before(d, policy.Caller{APIKeySHA256: "not-hex"})
	require.Equal(t, decision.StatusRefused, garbage.Outcome.Status)
}
