package batch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/batch"
)

// fakeScorer stands in for the engine (the real one is exercised by
// cmd/verdict's llamacpp tests): it records each call's decision ids and
// gives option i the logit -i, so the first option is always chosen.
type fakeScorer struct {
	calls  [][]string
	failAt int // fail the call with this 1-based number (0 = never)
}

func (f *fakeScorer) score(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	f.calls = append(f.calls, ids)
	if f.failAt == len(f.calls) {
		return nil, errors.New("fake: engine busy")
	}
	rs := make([]decision.Result, len(ds))
	for i, d := range ds {
		lg := make([]float64, len(d.Options))
		for j := range lg {
			lg[j] = -float64(j)
		}
		rs[i] = decision.Result{ID: d.ID, OptionIDs: d.OptionIDs(), OptionLogits: lg, Chosen: d.Options[0].ID, Tokens: &decision.Tokens{Input: 10, Evaluated: 4}}
	}
	return rs, nil
}

func semif(id, state string) string {
	return fmt.Sprintf(`{"id":%q,"state":%q,"question":"Which?","options":[{"id":"a","description":"A."},{"id":"b","description":"B."}]}`, id, state)
}

func records(t *testing.T, b []byte) []batch.Record {
	t.Helper()
	var out []batch.Record
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r batch.Record
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		out = append(out, r)
	}
	return out
}

func TestRunBadLinesBecomeErrorRecordsAndTheRestIsScored(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		semif("d1", "s1"),
		`{"id":"d2","state":`,                     // malformed
		`{"id":"x","stat":"s","options"}`,         // malformed too
		semif("d3", strings.Repeat("long ", 400)), // over-long line
		"",
		`{"id":"d5","state":"s1","question":"q?","options":[{"id":"only","description":"One."}]}`, // invalid
		`{"id":"c1","state":"case state","questions":{"q1":{"type":"noul","instructions":"Is it?"},"q2":{"type":"choice","instructions":"Which?","criteria":{"x":"X.","y":"Y."}}}}`,
		semif("d7", "s2"),
	}, "\n") + "\n"
	f := &fakeScorer{}
	var out, errs bytes.Buffer
	sum, err := batch.Run(context.Background(), batch.Config{Score: f.score, MaxLineBytes: 1000, Errors: &errs}, strings.NewReader(in), &out)
	require.NoError(t, err)
	rs := records(t, out.Bytes())
	require.Equal(t, []int{1, 2, 3, 4, 6, 7, 8}, []int{rs[0].Line, rs[1].Line, rs[2].Line, rs[3].Line, rs[4].Line, rs[5].Line, rs[6].Line})
	require.Nil(t, rs[0].Error)
	require.Equal(t, "a", rs[0].Results[0].Chosen)
	require.EqualValues(t, "malformed", rs[1].Error.Code)
	require.EqualValues(t, "malformed", rs[2].Error.Code)
	require.EqualValues(t, "too_large", rs[3].Error.Code)
	require.Contains(t, rs[3].Error.Message, "--max-line-bytes (1000)")
	require.EqualValues(t, "invalid", rs[4].Error.Code)
	require.Equal(t, "options", rs[4].Error.Fields[0].Path)
	require.Equal(t, "systemone", rs[5].Format)
	require.Equal(t, "c1", rs[5].ID)
	require.Equal(t, map[string]string{"q1": "noul", "q2": "choice"}, rs[5].Types)
	require.Len(t, rs[5].Results, 2)
	require.Equal(t, 7, rs[5].Results[1].Line)
	require.Equal(t, "d7", rs[6].Results[0].ID)
	require.Equal(t, 4, sum.Decisions)
	require.Equal(t, 4, sum.LinesFailed)
	require.Equal(t, map[string]int{"scored": 4}, sum.Status)
	require.Equal(t, int64(24), sum.TokensSaved)
	require.Len(t, records(t, errs.Bytes()), 4)
}

func TestRunGroupsSharedStatesAcrossLinesAndKeepsInputOrder(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{semif("1", "A"), semif("2", "B"), semif("3", "A"), semif("4", "C"), semif("5", "B"), semif("6", "A")}, "\n")
	f := &fakeScorer{}
	var out bytes.Buffer
	_, err := batch.Run(context.Background(), batch.Config{Score: f.score, Chunk: 4}, strings.NewReader(in), &out)
	require.NoError(t, err)
	// State A's three decisions alone (3+2 > 4), then B's two with C's one.
	require.Equal(t, [][]string{{"1", "3", "6"}, {"2", "5", "4"}}, f.calls)
	var ids []string
	for _, r := range records(t, out.Bytes()) {
		ids = append(ids, r.Results[0].ID)
	}
	require.Equal(t, []string{"1", "2", "3", "4", "5", "6"}, ids)
}

func TestRunWindowBoundsGrouping(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{semif("1", "A"), semif("2", "B"), semif("3", "A"), semif("4", "B")}, "\n")
	f := &fakeScorer{}
	_, err := batch.Run(context.Background(), batch.Config{Score: f.score, Window: 2}, strings.NewReader(in), &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, [][]string{{"1", "2"}, {"3", "4"}}, f.calls) // 1 and 3 share a state but not a window
}

// TestResumeAfterInterruptionGivesTheUninterruptedOutput stops a run with
// a whole-call failure, tears its last line as a SIGKILL mid-write would,
// resumes, and compares with one uninterrupted run byte for byte.
func TestResumeAfterInterruptionGivesTheUninterruptedOutput(t *testing.T) {
	t.Parallel()
	var lines []string
	for i := range 40 {
		lines = append(lines, semif(fmt.Sprint("d", i), fmt.Sprint("state", i%7)))
		if i == 17 {
			lines = append(lines, `{"broken":`)
		}
	}
	in := strings.Join(lines, "\n") + "\n"
	cfg := func(f *fakeScorer, skip int, errs io.Writer) batch.Config {
		return batch.Config{Score: f.score, Window: 8, Chunk: 4, Skip: skip, Errors: errs}
	}
	var want bytes.Buffer
	_, err := batch.Run(context.Background(), cfg(&fakeScorer{}, 0, nil), strings.NewReader(in), &want)
	require.NoError(t, err)

	dir := t.TempDir()
	outPath, errPath := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "errors.jsonl")
	out, err := os.Create(outPath)
	require.NoError(t, err)
	ef, err := os.Create(errPath)
	require.NoError(t, err)
	_, err = batch.Run(context.Background(), cfg(&fakeScorer{failAt: 6}, 0, ef), strings.NewReader(in), out)
	require.ErrorContains(t, err, "fake: engine busy")
	_, err = out.WriteString(`{"line":99,"format":"semif","resu`) // torn
	require.NoError(t, err)
	require.NoError(t, out.Close())
	_, err = ef.WriteString(`{"line":30,"format":"semif","error":{}}` + "\n") // ahead of out
	require.NoError(t, err)
	require.NoError(t, ef.Close())

	last, err := batch.Resume(outPath)
	require.NoError(t, err)
	require.Greater(t, last, 0)
	require.Less(t, last, 41)
	require.NoError(t, batch.TrimAfter(errPath, last))
	out, err = os.OpenFile(outPath, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	ef, err = os.OpenFile(errPath, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	sum, err := batch.Run(context.Background(), cfg(&fakeScorer{}, last, ef), strings.NewReader(in), out)
	require.NoError(t, err)
	require.Equal(t, last, sum.Resumed)
	require.NoError(t, out.Close())
	require.NoError(t, ef.Close())
	got, err := os.ReadFile(outPath)
	require.NoError(t, err)
	require.Equal(t, want.String(), string(got))
	errLines, err := os.ReadFile(errPath)
	require.NoError(t, err)
	require.Len(t, records(t, errLines), 1) // the broken line, once
	require.Equal(t, 19, records(t, errLines)[0].Line)
}

func TestResumeMissingFileStartsAtZero(t *testing.T) {
	t.Parallel()
	last, err := batch.Resume(filepath.Join(t.TempDir(), "none.jsonl"))
	require.NoError(t, err)
	require.Equal(t, 0, last)
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestPlainProgressWritesPeriodicLines(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Unix(1000, 0)}
	var w bytes.Buffer
	p := &batch.Plain{W: &w, Every: 10 * time.Second, NowFunc: clk.now}
	p.Update(batch.Snapshot{Decisions: 1})
	clk.t = clk.t.Add(5 * time.Second)
	p.Update(batch.Snapshot{Decisions: 2})
	require.Empty(t, w.String())
	clk.t = clk.t.Add(5 * time.Second)
	p.Update(batch.Snapshot{Lines: 5, Decisions: 50, Failed: 1, Bytes: 250, TotalBytes: 1000, Elapsed: 10 * time.Second})
	require.Equal(t, "batch: 5 lines, 50 decisions (1 failed), 5.0 decisions/s, 25.0% of input, ETA 30s\n", w.String())
	p.Finish(batch.Snapshot{Lines: 20, Decisions: 200, Bytes: 1000, TotalBytes: 1000, Elapsed: 40 * time.Second})
	require.Contains(t, w.String(), "batch: done: 20 lines, 200 decisions (0 failed), 5.0 decisions/s, 100.0% of input\n")
}
