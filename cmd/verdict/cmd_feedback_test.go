package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/calibrate"
	"github.com/verdict-dev/verdict/internal/eval"
	"github.com/verdict-dev/verdict/internal/quality"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

const feedbackModelSHA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// labelsAt is when the seeded labels are given: label i at labelsAt + i
// minutes.
var labelsAt = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// seededLabel is one published decision and the label a caller gave it.
type seededLabel struct {
	stored results.Stored
	label  results.Feedback
}

// seedFeedback publishes decisions to a results store in a new data
// directory, as verdict up's worker does, and labels them through
// results.GiveFeedback, as the feedback call does: tenant acme gets 10
// decisions of kind route (three options) and 5 of kind triage (two),
// labeled in that order; decision route-3 is labeled twice (its latest
// label counts); tenant globex gets 2 of kind route. It returns the data
// directory and acme's labeled decisions in label order, with their
// latest labels.
func seedFeedback(t *testing.T) (string, []seededLabel) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := results.OpenLocal(dir)
	require.NoError(t, err)
	defer st.Close()
	model := &decision.ModelIdentity{File: "/models/tiny.gguf", SHA256: feedbackModelSHA, Name: "tiny"}
	publish := func(tenant, req, kind string, i int) results.Stored {
		opts := []string{"billing", "account", "sales"}
		if kind == "triage" {
			opts = []string{"urgent", "later"}
		}
		logits := make([]float64, len(opts))
		for j := range logits {
			logits[j] = float64((i*7+j*3)%5) - 2 // varied, some confident, some not
		}
		probs := calibrate.Probs(logits, 1)
		rec := sink.Record{RequestID: req, DecisionID: fmt.Sprintf("%s-%d", kind, i), Tenant: tenant, Format: "semif",
			SubmittedAt: labelsAt, Status: decision.StatusDecided,
			Result: decision.Result{ID: fmt.Sprintf("%s-%d", kind, i), Kind: kind, OptionIDs: opts, Probabilities: probs, OptionLogits: logits,
				Chosen: opts[eval.Argmax(probs)], Temperature: 1, TemperatureSource: "default", PromptVersion: "semif-v1", Model: model}}
		require.NoError(t, st.Publish(ctx, []sink.Record{rec}))
		got, err := st.Get(ctx, req, rec.DecisionID)
		require.NoError(t, err)
		return got
	}
	n := 0
	give := func(s results.Stored, option string) results.Feedback {
		fb := results.Feedback{RequestID: s.Record.RequestID, DecisionID: s.Record.DecisionID, Tenant: s.Record.Tenant,
			Option: option, Source: "test", By: "alice", At: labelsAt.Add(time.Duration(n) * time.Minute)}
		n++
		a, err := results.GiveFeedback(ctx, st, fb)
		require.NoError(t, err)
		require.False(t, a.Replay)
		return a.Label
	}
	var acme []seededLabel
	var route3 results.Stored
	for i := range 10 {
		s := publish("acme", "req_a", "route", i)
		opts := s.Record.Result.OptionIDs
		option := opts[(i*2)%len(opts)] // agrees with the model sometimes
		if i == 3 {
			route3 = s
			give(s, opts[0]) // superseded below
			continue
		}
		acme = append(acme, seededLabel{s, give(s, option)})
	}
	for i := range 5 {
		s := publish("acme", "req_b", "triage", i)
		acme = append(acme, seededLabel{s, give(s, s.Record.Result.OptionIDs[i%2])})
	}
	acme = append(acme, seededLabel{route3, give(route3, "sales")})
	for i := range 2 {
		s := publish("globex", "req_g", "route", i)
		give(s, "billing")
	}
	return dir, acme
}

// captureStdout runs fn with os.Stdout going to a pipe and returns what
// it wrote. Only for tests that do not run in parallel.
func captureStdout(t *testing.T, fn func()) []byte {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	defer func() { os.Stdout = old }()
	fn()
	w.Close()
	return <-done
}

func feedbackReportJSON(t *testing.T, args ...string) feedbackReport {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, runFeedbackReport(context.Background(), append(args, "--json"), &out))
	var rep feedbackReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	return rep
}

// The export is what `verdict eval` and `verdict calibrate` read, and
// `verdict eval` on it prints the figures `verdict feedback report`
// prints and the live window shows for the same labels (the issue:
// running eval on the export reproduces the live quality figures). Not
// parallel: it reads verdict eval's standard output.
func TestFeedbackExportEvalReportAndLiveAgree(t *testing.T) {
	ctx := context.Background()
	dir, acme := seedFeedback(t)
	out := t.TempDir()
	gold := filepath.Join(out, "gold.jsonl")
	var log bytes.Buffer
	require.NoError(t, runFeedbackExport(ctx, []string{"--data", dir, "--tenant", "acme", "-o", gold}, &log))
	pred := filepath.Join(out, "gold.predictions.jsonl")
	require.Contains(t, log.String(), "15 labeled decisions")
	require.Contains(t, log.String(), "verdict eval --gold "+gold+" --predictions "+pred)

	// the files: one gold line and one record per labeled decision, in
	// label order, route-3 once with its latest label
	gl := strings.Split(strings.TrimSpace(string(readFile(t, gold))), "\n")
	require.Len(t, gl, 15)
	require.JSONEq(t, `{"id":"req_a/route-3","gold":{"route-3":"sales"}}`, gl[14])
	recs, err := eval.ReadRecords(pred)
	require.NoError(t, err)
	require.Len(t, recs, 15)
	require.Equal(t, "req_a/route-0", recs[0].ID)
	require.Equal(t, "route-0", recs[0].Results[0].ID)
	require.Equal(t, acme[0].stored.Record.Result.Probabilities, recs[0].Results[0].Probabilities)

	// verdict eval on the export, its own command and output
	var evalRep eval.Report
	evalOut := captureStdout(t, func() {
		require.NoError(t, runEval(ctx, []string{"--gold", gold, "--predictions", pred, "--json", "--svg", filepath.Join(out, "eval.svg")}))
	})
	require.NoError(t, json.Unmarshal(evalOut, &evalRep), "%s", evalOut)
	require.Equal(t, 15, evalRep.Labeled)

	// the report over the store
	svg := filepath.Join(out, "report.svg")
	rep := feedbackReportJSON(t, "--data", dir, "--tenant", "acme", "--window", "4", "--svg", svg)
	require.Equal(t, evalRep.Labeled, rep.Overall.Labeled)
	require.Equal(t, evalRep.Accuracy, rep.Overall.Accuracy)
	require.Equal(t, evalRep.Brier, rep.Overall.Brier)
	require.Equal(t, evalRep.ECE, rep.Overall.ECE)
	require.Equal(t, evalRep.Bins, rep.Overall.Bins)
	require.Contains(t, string(readFile(t, svg)), fmt.Sprintf("ECE %.4f · accuracy %.4f", evalRep.ECE, evalRep.Accuracy), "eval's reliability diagram")

	// per kind: eval's breakdown rows (family = kind, every type)
	require.Len(t, rep.Groups, 2)
	for _, g := range rep.Groups {
		require.Equal(t, "tiny", g.Model)
		var row *eval.BreakdownRow
		for i := range evalRep.Breakdown {
			if b := &evalRep.Breakdown[i]; b.Family == g.Kind && b.Type == "*" {
				row = b
			}
		}
		require.NotNil(t, row, g.Kind)
		require.Equal(t, row.Labeled, g.All.Labels)
		require.Equal(t, row.Accuracy, g.All.Agreement)
		require.Equal(t, row.ECE, g.All.ECE)
	}
	route := rep.Groups[0]
	require.Equal(t, "route", route.Kind)
	require.Len(t, route.Windows, 3, "10 labels in windows of 4: 1-2, 3-6, 7-10")
	require.Equal(t, [2]int{7, 10}, [2]int{route.Windows[2].First, route.Windows[2].Last})

	// the live window, fed the same answers in the same order
	live := quality.New(quality.Config{Size: 100})
	last := quality.New(quality.Config{Size: 4})
	for _, l := range acme {
		live.Observe(l.stored, l.label)
		last.Observe(l.stored, l.label)
	}
	for i, g := range live.Snapshot() {
		require.Equal(t, rep.Groups[i].Key, g.Key)
		require.Equal(t, rep.Groups[i].All, g.Window)
	}
	require.Equal(t, route.Windows[2].Stats, last.Snapshot()[0].Window, "the report's last window is the live gauges' window")

	// verdict calibrate runs on the export; its fit is the report's ECE
	// reference for the model and prompt it is pinned to
	cal := filepath.Join(out, "calibration.json")
	captureStdout(t, func() {
		require.NoError(t, runCalibrate(ctx, []string{"--gold", gold, "--predictions", pred, "-o", cal}))
	})
	c, err := calibrate.Load(cal)
	require.NoError(t, err)
	require.Equal(t, 15, c.Samples)
	require.Equal(t, feedbackModelSHA, c.ModelSHA256)
	rep = feedbackReportJSON(t, "--data", dir, "--tenant", "acme", "--window", "4", "--calibration", cal, "--margin", "0")
	require.Equal(t, c.CrossValidation.ECEAfter, rep.Groups[0].Baseline.ECE.Value)
	require.Equal(t, "calibration.json (cross_validation.ece_after)", rep.Groups[0].Baseline.ECE.From)
	require.Equal(t, 10, rep.Groups[0].Pinned)
	require.Equal(t, 0, rep.Groups[0].Calibrated, "scored before the calibration existed")
	require.True(t, rep.Drift, "margin 0: every window differs from the fit's ECE")
	var text bytes.Buffer
	err = runFeedbackReport(ctx, []string{"--data", dir, "--tenant", "acme", "--window", "4", "--calibration", cal, "--margin", "0", "--fail-on-drift"}, &text)
	require.Equal(t, exitCode(3), err)
	require.Contains(t, text.String(), "DRIFT labels 7-10: ece")
	require.Contains(t, text.String(), "0 of 10 results were scored with calibration.json")
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// --tenant, --kind, --from and --to pick the labels.
func TestFeedbackExportFilters(t *testing.T) {
	t.Parallel()
	dir, _ := seedFeedback(t)
	export := func(t *testing.T, args ...string) []string {
		t.Helper()
		gold := filepath.Join(t.TempDir(), "gold.jsonl")
		require.NoError(t, runFeedbackExport(context.Background(), append([]string{"--data", dir, "-o", gold}, args...), io.Discard))
		var ids []string
		for _, l := range strings.Split(strings.TrimSpace(string(readFile(t, gold))), "\n") {
			if l == "" {
				continue
			}
			var g goldLine
			require.NoError(t, json.Unmarshal([]byte(l), &g))
			ids = append(ids, g.ID)
		}
		recs, err := eval.ReadRecords(predictionsBeside(gold))
		require.NoError(t, err)
		require.Len(t, recs, len(ids))
		return ids
	}
	require.Empty(t, export(t), "the default tenant has no labels")
	require.Equal(t, []string{"req_g/route-0", "req_g/route-1"}, export(t, "--tenant", "globex"))
	require.Equal(t, []string{"req_b/triage-0", "req_b/triage-1", "req_b/triage-2", "req_b/triage-3", "req_b/triage-4"},
		export(t, "--tenant", "acme", "--kind", "triage"))
	// labels 0..9 are route-0..9 (route-3 first at minute 3), 10..14
	// triage-0..4, 15 route-3 again
	at := func(min int) string { return labelsAt.Add(time.Duration(min) * time.Minute).Format(time.RFC3339) }
	require.Equal(t, []string{"req_a/route-4", "req_a/route-5"}, export(t, "--tenant", "acme", "--from", at(3), "--to", at(6)),
		"route-3's label at minute 3 is not its latest")
	require.Equal(t, []string{"req_b/triage-4", "req_a/route-3"}, export(t, "--tenant", "acme", "--from", at(14)))
	rep := feedbackReportJSON(t, "--data", dir, "--tenant", "acme", "--kind", "route", "--to", at(5))
	require.Equal(t, 4, rep.Overall.Labeled, "route-0, 1, 2, 4")
}

// Bad flags are errors that name the flag.
func TestFeedbackFlagErrors(t *testing.T) {
	t.Parallel()
	dir, _ := seedFeedback(t)
	gold := filepath.Join(t.TempDir(), "gold.jsonl")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "--data", dir, "-o", gold, "--from", "yesterday"}, `flag --from: bad value "yesterday"`},
		{[]string{"export", "--data", dir, "-o", gold, "--to", "2026-05-01"}, `flag --to: bad value`},
		{[]string{"export", "--data", dir, "-o", gold, "--from", "2026-05-02T00:00:00Z", "--to", "2026-05-01T00:00:00Z"}, "flag --to: "},
		{[]string{"export", "--data", dir}, "flag -o: required"},
		{[]string{"export", "-o", gold}, "flag --data: name the results store"},
		{[]string{"export", "--data", dir, "--results-table", "t", "-o", gold}, "flag --data: give --data or --results-table, not both"},
		{[]string{"export", "--data", t.TempDir(), "-o", gold}, "flag --data: no results store in"},
		{[]string{"export", "--data", dir, "-o", gold, "--predictions", gold}, "flag --predictions: "},
		{[]string{"report", "--data", dir, "--from", "nope"}, `flag --from: bad value "nope"`},
		{[]string{"report", "--data", dir, "--window", "0"}, "flag --window: must be at least 1"},
		{[]string{"report", "--data", dir, "--margin", "2"}, "flag --margin: must be in [0, 1]"},
		{[]string{"report", "--data", dir, "--calibration", gold}, "flag --calibration: "},
	} {
		err := runFeedback(context.Background(), c.args)
		require.ErrorContains(t, err, c.want, "%v", c.args)
	}
	_, err := os.Stat(gold)
	require.ErrorIs(t, err, os.ErrNotExist, "a failed export writes nothing")
}

// TestFeedbackExportByModel: with a cascade, labeled results mix two
// models, which verdict calibrate refuses. --model exports what one model
// answered: its final results and the cascade stages it scored, with that
// stage's logits, so that each model is calibrated alone.
func TestFeedbackExportByModel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := results.OpenLocal(dir)
	require.NoError(t, err)
	small := &decision.ModelIdentity{File: "/models/small.gguf", SHA256: strings.Repeat("a", 64), Name: "small"}
	big := &decision.ModelIdentity{File: "/models/big.gguf", SHA256: strings.Repeat("b", 64), Name: "big"}
	opts := []string{"billing", "account"}
	scored := func(m *decision.ModelIdentity, i int) decision.Result {
		logits := []float64{float64(i%3) - 1, float64(i%2) * 0.5}
		probs := calibrate.Probs(logits, 1)
		return decision.Result{Kind: "route", OptionIDs: opts, Probabilities: probs, OptionLogits: logits, Chosen: opts[eval.Argmax(probs)],
			Temperature: 1, PromptVersion: "semif-v1", Model: m, Outcome: &decision.Outcome{Status: decision.StatusDecided}}
	}
	const n = 12 // even: escalated to the big model; odd: settled by the small one
	for i := 0; i < n; i++ {
		res := scored(small, i)
		if i%2 == 0 {
			first := res
			first.Outcome = &decision.Outcome{Status: decision.StatusEscalate, Reason: "p_max below 0.8"}
			res = scored(big, i+1)
			res.Cascade = []decision.CascadeStage{decision.StageOf(decision.RouteCPU, &first, false), decision.StageOf(decision.RouteGPU, &res, true)}
		}
		res.ID = fmt.Sprintf("d%d", i)
		rec := sink.Record{RequestID: "req", DecisionID: res.ID, Tenant: "acme", Format: "semif", SubmittedAt: labelsAt, Status: res.Outcome.Status, Result: res}
		require.NoError(t, st.Publish(ctx, []sink.Record{rec}))
		_, err := results.GiveFeedback(ctx, st, results.Feedback{RequestID: "req", DecisionID: res.ID, Tenant: "acme", Option: opts[i%2], Source: "test",
			At: labelsAt.Add(time.Duration(i) * time.Minute)})
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())

	export := func(args ...string) (string, []decision.Result, string) {
		gold := filepath.Join(t.TempDir(), "gold.jsonl")
		var log bytes.Buffer
		require.NoError(t, runFeedbackExport(ctx, append([]string{"--data", dir, "--tenant", "acme", "-o", gold}, args...), &log))
		recs, err := eval.ReadRecords(predictionsBeside(gold))
		require.NoError(t, err)
		var rs []decision.Result
		for _, r := range recs {
			rs = append(rs, r.Results...)
		}
		return gold, rs, log.String()
	}
	_, all, log := export()
	require.Len(t, all, n)
	require.Contains(t, log, "6 of them were settled by a cascade")

	gold, rs, _ := export("--model", "small.gguf")
	require.Len(t, rs, n, "the small model scored every decision: 6 finals, 6 first stages")
	for i, r := range rs {
		require.Equal(t, small.SHA256, r.Model.SHA256, r.ID)
		require.Equal(t, fmt.Sprintf("d%d", i), r.ID)
		require.Equal(t, scored(small, i).OptionLogits, r.OptionLogits, "the small model's own logits, from its stage")
		require.Empty(t, r.Cascade)
	}
	out := filepath.Join(t.TempDir(), "small.calibration.json")
	require.NoError(t, runCalibrate(ctx, []string{"--gold", gold, "--predictions", predictionsBeside(gold), "-o", out, "--folds", "3"}))
	c, err := calibrate.Load(out)
	require.NoError(t, err)
	require.Equal(t, small.SHA256, c.ModelSHA256)

	_, rs, _ = export("--model", strings.Repeat("b", 8))
	require.Len(t, rs, n/2, "the big model answered the escalated half")
	for _, r := range rs {
		require.Equal(t, big.SHA256, r.Model.SHA256)
	}
	_, rs, _ = export("--model", "other.gguf")
	require.Empty(t, rs)

	// Without --model, the mix is refused by calibrate, naming both models.
	gold, _, _ = export()
	err = runCalibrate(ctx, []string{"--gold", gold, "--predictions", predictionsBeside(gold), "-o", filepath.Join(t.TempDir(), "c.json"), "--folds", "3"})
	require.ErrorContains(t, err, "more than one model")
}
