//go:build cgo

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
	"github.com/verdict-dev/verdict/engine/enginetest"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/gguf"
)

func scoreLines(t *testing.T, out []byte) []decision.Result {
	t.Helper()
	var rs []decision.Result
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r decision.Result
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		rs = append(rs, r)
	}
	return rs
}

// TestScoreStream feeds good, malformed, invalid and blank lines through
// the real engine: one result per non-blank line, in order, with line
// numbers; bad lines become error results and the rest still runs.
func TestScoreStream(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, gguf.Synth(path, gguf.SynthOptions{Shape: "tiny", Seed: 3}))
	eng, err := llamacpp.New(llamacpp.Options{ModelPath: path, Threads: 1})
	require.NoError(t, err)
	defer eng.Close()

	good := `{"id":"a","state":"Password reset email never arrived.","question":"Which queue?","options":[{"id":"access","description":"Account access."},{"id":"billing","description":"Billing."}]}`
	input := strings.Join([]string{
		good,
		`{"id":"b","state":`, // malformed
		"",                   // blank: skipped, still counted
		`{"id":"c","state":"x","question":"q?","options":[{"id":"only","description":"One."}]}`,
		`{"decision":` + good + `}`,
	}, "\n")
	var out bytes.Buffer
	failed, err := scoreStream(context.Background(), eng, nil, decision.Limits{}, strings.NewReader(input), &out, 1<<20)
	require.NoError(t, err)
	require.Equal(t, 2, failed)
	rs := scoreLines(t, out.Bytes())
	require.Len(t, rs, 4)
	require.Equal(t, []int{1, 2, 4, 5}, []int{rs[0].Line, rs[1].Line, rs[2].Line, rs[3].Line})
	require.Nil(t, rs[0].Error)
	require.EqualValues(t, "malformed", rs[1].Error.Code)
	require.EqualValues(t, "invalid", rs[2].Error.Code)
	require.Equal(t, "options", rs[2].Error.Fields[0].Path)
	for i := range rs[0].Probabilities { // the same decision twice in one batch: rounding only
		require.InDelta(t, rs[0].Probabilities[i], rs[3].Probabilities[i], enginetest.ProbTol(1e-6))
	}

	// With the example policy, each result carries an outcome.
	pol, err := loadPolicy("../../examples/policy.yaml")
	require.NoError(t, err)
	out.Reset()
	failed, err = scoreStream(context.Background(), eng, pol, decision.Limits{}, strings.NewReader(good+"\n"), &out, 1<<20)
	require.NoError(t, err)
	require.Equal(t, 0, failed)
	rs = scoreLines(t, out.Bytes())
	require.NotNil(t, rs[0].Outcome)
	require.NotEmpty(t, rs[0].Outcome.Status)

	// A configured state limit is enforced with the field's path.
	out.Reset()
	failed, err = scoreStream(context.Background(), eng, nil, decision.Limits{MaxStateBytes: 10}, strings.NewReader(good+"\n"), &out, 1<<20)
	require.NoError(t, err)
	require.Equal(t, 1, failed)
	rs = scoreLines(t, out.Bytes())
	require.EqualValues(t, "too_large", rs[0].Error.Code)
	require.Equal(t, "state", rs[0].Error.Fields[0].Path)

	// A line longer than the limit, first or in the middle, becomes an
	// error result naming its line; every other line is still scored.
	out.Reset()
	long := `{"id":"z","state":"` + strings.Repeat("x", 2000) + `","question":"q?","options":[{"id":"a","description":""},{"id":"b","description":""}]}`
	failed, err = scoreStream(context.Background(), eng, nil, decision.Limits{}, strings.NewReader(long+"\n"+good+"\n"+long+"\n"+good+"\n"), &out, 1024)
	require.NoError(t, err)
	require.Equal(t, 2, failed)
	rs = scoreLines(t, out.Bytes())
	require.Len(t, rs, 4)
	for i, r := range rs {
		require.Equal(t, i+1, r.Line)
		if i%2 == 0 {
			require.EqualValues(t, "too_large", r.Error.Code)
			require.Contains(t, r.Error.Message, "--max-line-bytes (1024)")
		} else {
			require.Nil(t, r.Error)
			require.NotEmpty(t, r.Chosen)
		}
	}
}

// TestScoreCommandExamples runs `verdict score` on examples/decisions.jsonl:
// every line scores, and the exit status is 0; a bad file gives status 1.
func TestScoreCommandExamples(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, gguf.Synth(path, gguf.SynthOptions{Shape: "tiny", Seed: 3}))
	capture := func(args ...string) (string, error) {
		f, err := os.CreateTemp(dir, "out")
		require.NoError(t, err)
		old := os.Stdout
		os.Stdout = f
		err = runScore(context.Background(), args)
		os.Stdout = old
		require.NoError(t, f.Close())
		b, rerr := os.ReadFile(f.Name())
		require.NoError(t, rerr)
		return string(b), err
	}
	out, err := capture("-m", path, "--log-level", "warn", "../../examples/decisions.jsonl")
	require.NoError(t, err)
	rs := scoreLines(t, []byte(out))
	require.Len(t, rs, 10)
	for _, r := range rs {
		require.Nil(t, r.Error, r.ID)
		require.NotEmpty(t, r.Chosen)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{}\n"), 0o644))
	_, err = capture("-m", path, "--log-level", "warn", bad)
	require.Equal(t, exitCode(1), err)
	_, err = capture("-m", filepath.Join(dir, "missing.gguf"), bad)
	require.ErrorContains(t, err, "--model")
}
