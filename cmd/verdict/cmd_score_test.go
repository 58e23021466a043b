package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/enginetest"
	"github.com/verdict-dev/verdict/internal/batch"
	"github.com/verdict-dev/verdict/internal/tune"
	"github.com/verdict-dev/verdict/policy"
)

const twoOptionLine = `{"id":"%s","state":"s","question":"q?","options":[{"id":"yes","description":"Yes."},{"id":"no","description":"No."}]}`

func lines(ids ...string) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(strings.Replace(twoOptionLine, "%s", id, 1) + "\n")
	}
	return b.String()
}

func readResults(t *testing.T, b []byte) []decision.Result {
	t.Helper()
	var rs []decision.Result
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var r decision.Result
		require.NoError(t, json.Unmarshal(l, &r))
		rs = append(rs, r)
	}
	return rs
}

// TestOfflineKeepsTheTemperatureFlagUnderAPolicy: `score` and `batch`
// (which eval runs) with --temperature 4 and a policy whose top-level
// temperature is 1 (as the example policy's is) write T=4 results —
// [0.62, 0.38] — not the policy default's [0.88, 0.12].
func TestOfflineKeepsTheTemperatureFlagUnderAPolicy(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse([]byte("temperature: 1.0\nkinds: {default: {min_probability: 0.5}}\n"))
	require.NoError(t, err)
	sc := tune.New(enginetest.FakeRawEngine{}, tune.Config{Temperature: 4})
	check := func(t *testing.T, rs []decision.Result) {
		require.Len(t, rs, 1)
		r := rs[0]
		require.InDelta(t, 0.6225, r.Probabilities[0], 1e-4, "T=4, not the policy's default of 1")
		require.InDelta(t, 0.3775, r.Probabilities[1], 1e-4)
		require.Equal(t, 4.0, r.Temperature)
		require.Equal(t, tune.SourceFlag, r.TemperatureSource)
		require.Equal(t, decision.StatusDecided, r.Outcome.Status)
	}
	t.Run("score", func(t *testing.T) {
		var out bytes.Buffer
		failed, err := scoreStream(context.Background(), sc, pol, decision.Limits{}, strings.NewReader(lines("a")), &out, 1<<20)
		require.NoError(t, err)
		require.Zero(t, failed)
		check(t, readResults(t, out.Bytes()))
	})
	t.Run("batch", func(t *testing.T) {
		dir := t.TempDir()
		in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
		require.NoError(t, os.WriteFile(in, []byte(lines("a")), 0o644))
		bf := batchFlags{maxLine: 1 << 20, maxState: decision.DefaultLimits().MaxStateBytes, window: 16, chunk: 16, progress: "none"}
		_, err := batchFile(context.Background(), &bf, scoreFunc(sc.Score, pol), in, out, "", false)
		require.NoError(t, err)
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		var rec batch.Record
		require.NoError(t, json.Unmarshal(b, &rec))
		check(t, rec.Results)
	})
}

// TestScoreEndsOnAFailedScoringCall: a scoring call that fails as a whole
// (here a closed engine) ends `score` with that error, naming the lines it
// held, whether a policy runs or not; the policy flow's error is not
// dropped into on_error results while the run goes on.
func TestScoreEndsOnAFailedScoringCall(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse([]byte("kinds: {default: {on_error: abstain}}\n"))
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		pol  *policy.Policy
	}{{"no policy", nil}, {"policy", pol}} {
		t.Run(c.name, func(t *testing.T) {
			sc := tune.New(enginetest.FakeRawEngine{Err: engine.ErrClosed}, tune.Config{})
			var out bytes.Buffer
			_, err := scoreStream(context.Background(), sc, c.pol, decision.Limits{}, strings.NewReader(lines("a", "b")), &out, 1<<20)
			require.ErrorIs(t, err, engine.ErrClosed)
			require.ErrorContains(t, err, "lines 1-2")
			require.Empty(t, out.String(), "no result stands in for the failed call")
		})
	}
}
