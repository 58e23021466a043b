package eval_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/batch"
	"github.com/verdict-dev/verdict/internal/eval"
)

func TestJoinJevBenchGoldWithBatchRecords(t *testing.T) {
	t.Parallel()
	gold, err := eval.ReadGold(strings.NewReader(`{"id":"c1","gold":{"q1":true,"q2":"beta","q3":2,"q4":"unknown"}}
{"id":"d9","gold":"no"}
`))
	require.NoError(t, err)
	fam, err := eval.ReadFamilies(strings.NewReader(`{"id":"c1","domain":"it","state":"…"}` + "\n"))
	require.NoError(t, err)
	res := func(id string, opts []string, probs ...float64) decision.Result {
		return decision.Result{ID: id, OptionIDs: opts, Probabilities: probs, Timing: &decision.Timing{Total: 5}}
	}
	recs := []batch.Record{
		{Line: 1, ID: "c1", Format: "systemone", Types: map[string]string{"q1": "noul", "q2": "choice", "q3": "score", "q4": "noul"}, Results: []decision.Result{
			res("q1", []string{"true", "false"}, 0.9, 0.1),
			res("q2", []string{"alpha", "beta"}, 0.6, 0.4),
			res("q3", []string{"0", "1", "2"}, 0.1, 0.2, 0.7),
			res("q4", []string{"true", "false"}, 0.5, 0.5),
			res("q5", []string{"true", "false"}, 0.5, 0.5),
		}},
		{Line: 2, ID: "d9", Results: []decision.Result{res("d9", []string{"yes", "no"}, 0.2, 0.8)}},
		{Line: 3, Error: &decision.Error{Code: "malformed"}},
		{Line: 4, ID: "d9", Results: []decision.Result{{ID: "d9", OptionIDs: []string{"yes", "maybe"}, Error: &decision.Error{Code: "engine"}}}},
	}
	m := eval.Join(recs, gold, fam)
	require.Equal(t, 1, m.Skipped)
	require.Equal(t, 1, m.Unmatched)
	require.Equal(t, 1, m.LineErrors)
	require.Equal(t, 1, m.BadGold, `"no" is not an option of line 4`)
	require.Len(t, m.Examples, 4)
	require.Equal(t, []int{0, 1, 2, 1}, []int{m.Examples[0].Gold, m.Examples[1].Gold, m.Examples[2].Gold, m.Examples[3].Gold})
	require.Equal(t, "it", m.Examples[0].Family)
	require.Equal(t, "score", m.Examples[2].Type)
	require.Equal(t, "-", m.Examples[3].Family)
	require.Equal(t, "decision", m.Examples[3].Type)
	require.InDelta(t, 0.75, eval.Accuracy(m.Examples), 1e-12) // q2 wrong
}

func TestReadGoldRejectsAFractionalLevel(t *testing.T) {
	t.Parallel()
	_, err := eval.ReadGold(strings.NewReader(`{"id":"c1","gold":{"q":1.5}}`))
	require.ErrorContains(t, err, "gold.q: a level must be an integer")
}
