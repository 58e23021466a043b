package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/server"
)

// Every capacity refusal on the System One route carries the hosted
// service's phrase (decision.Phrase*), by which its clients tell "this
// model cannot take that" from a broken request, and keeps the field path,
// the numbers and its status.
func TestSystemOneCapacityRefusalsUseTheHostedWords(t *testing.T) {
	t.Parallel()
	choice := func(n int) string {
		members := make([]string, n)
		for i := range members {
			members[i] = fmt.Sprintf(`"o%d":null`, i)
		}
		return `{"type":"choice","instructions":"Which?","criteria":{` + strings.Join(members, ",") + `}}`
	}
	score := func(n int) string {
		return `{"type":"score","instructions":"How much?","criteria":[` + strings.TrimSuffix(strings.Repeat(`"level",`, n), ",") + `]}`
	}
	b := setup(t, server.Config{})
	for _, c := range []struct {
		name, question, phrase string
		want                   []string
	}{
		{"no option", choice(0), decision.PhraseTooFewOptions, []string{"has 0 options"}},
		{"one option", choice(1), decision.PhraseTooFewOptions, []string{"has 1 options"}},
		{"256 options", choice(256), decision.PhraseOptionsPerChoice, []string{"has 256 options", "at most 255"}},
		{"one level", score(1), decision.PhraseScoreLevels, []string{"has 1 levels"}},
		{"eleven levels", score(11), decision.PhraseScoreLevels, []string{"has 11 levels", "at most 10"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			body := `{"model":"jev-latest","state":"s","questions":{"q":` + c.question + `}}`
			r := do(t, "POST", b.url+"/v1/systemone", []byte(body))
			require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
			m := r.json(t)
			msg := m["message"].(string)
			require.Contains(t, msg, c.phrase)
			require.Contains(t, msg, "questions.q.criteria")
			for _, w := range c.want {
				require.Contains(t, msg, w)
			}
			require.Equal(t, msg, m["detail"].(map[string]any)["message"])
			field := m["fields"].([]any)[0].(map[string]any)
			require.Equal(t, "questions.q.criteria", field["path"])
			require.Contains(t, field["message"], c.phrase)
		})
	}

	// A state beyond the context: the engine's refusal, as the engine
	// words it, reaches the client with the question it belongs to.
	tooLong := fmt.Errorf("%w: the prompt needs 9000 tokens, the context window holds 8192", engine.ErrContextFull)
	item := setup(t, server.Config{Scorer: &fakeScorer{itemErr: tooLong}})
	r := do(t, "POST", item.url+"/v1/systemone", []byte(systemOneAll))
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	msg := r.json(t)["message"].(string)
	require.Contains(t, msg, decision.PhraseContextWindow)
	require.Contains(t, msg, "9000 tokens")
	require.Contains(t, msg, `question "is_billing"`)
}
