package quality_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/eval"
	"github.com/verdict-dev/verdict/internal/quality"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

// stored is a published decision of kind and model with options a, b, …
// and these probabilities.
func stored(req, dec, kind, model string, probs ...float64) results.Stored {
	opts := []string{"a", "b", "c", "d"}[:len(probs)]
	return results.Stored{Record: sink.Record{RequestID: req, DecisionID: dec, Status: decision.StatusDecided,
		Result: decision.Result{ID: dec, Kind: kind, OptionIDs: opts, Probabilities: probs,
			Model: &decision.ModelIdentity{Name: model, SHA256: sha, File: "/m/" + model + ".gguf"}, PromptVersion: "v1"}}}
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func label(option string) results.Feedback { return results.Feedback{Option: option, By: "test"} }

func example(t *testing.T, s results.Stored, option string) eval.Example {
	t.Helper()
	e, ok := quality.ExampleOf(s, label(option))
	require.True(t, ok)
	return e
}

// The window keeps each group's latest Size labels, counts every answer,
// and its figures are eval's over those labels.
func TestWindowKeepsTheLatestLabelsOfEachGroup(t *testing.T) {
	t.Parallel()
	w := quality.New(quality.Config{Size: 3})
	type answer struct {
		s      results.Stored
		option string
	}
	route := []answer{
		{stored("r1", "d1", "route", "tiny", 0.9, 0.1), "b"}, // falls out of the window
		{stored("r1", "d2", "route", "tiny", 0.8, 0.2), "a"},
		{stored("r1", "d3", "route", "tiny", 0.3, 0.7), "a"},
		{stored("r2", "d1", "route", "tiny", 0.6, 0.4), "a"},
	}
	for _, a := range route {
		w.Observe(a.s, label(a.option))
	}
	w.Observe(stored("r3", "d1", "", "other", 0.2, 0.5, 0.3), label("b"))
	w.Observe(stored("r3", "d2", "", "other", 0.2, 0.5, 0.3), label("z")) // not an option: ignored

	got := w.Snapshot()
	require.Len(t, got, 2)
	require.Equal(t, quality.Key{Kind: "-", Model: "other"}, got[0].Key, "ordered by kind, then model; no kind is -")
	require.Equal(t, quality.Stats{Labels: 1, Valid: 1, Agreed: 1, Agreement: 1, Brier: 0.04 + 0.25 + 0.09, ECE: 0.5}, roundStats(got[0].Window))

	g := got[1]
	require.Equal(t, quality.Key{Kind: "route", Model: "tiny"}, g.Key)
	require.EqualValues(t, 2, g.Agreed)
	require.EqualValues(t, 2, g.Disagreed)
	var last []eval.Example
	for _, a := range route[1:] {
		last = append(last, example(t, a.s, a.option))
	}
	ece, _ := eval.ECE(last, 10)
	require.Equal(t, 3, g.Window.Labels)
	require.Equal(t, 2, g.Window.Agreed)
	require.Equal(t, eval.Accuracy(last), g.Window.Agreement)
	require.Equal(t, eval.Brier(last), g.Window.Brier)
	require.Equal(t, ece, g.Window.ECE)
}

func roundStats(s quality.Stats) quality.Stats {
	r := func(x float64) float64 { return float64(int64(x*1e9+0.5)) / 1e9 }
	s.Agreement, s.Brier, s.ECE = r(s.Agreement), r(s.Brier), r(s.ECE)
	return s
}

// A decision labeled again moves to the end of its window with its new
// label: it is measured once; both answers are counted.
func TestWindowMeasuresARelabeledDecisionOnce(t *testing.T) {
	t.Parallel()
	w := quality.New(quality.Config{Size: 3})
	d1 := stored("r1", "d1", "route", "tiny", 0.9, 0.1)
	w.Observe(d1, label("b"))
	w.Observe(stored("r1", "d2", "route", "tiny", 0.9, 0.1), label("a"))
	w.Observe(d1, label("a"))
	g := w.Snapshot()[0]
	require.Equal(t, 2, g.Window.Labels)
	require.Equal(t, 1.0, g.Window.Agreement, "d1's current label agrees")
	require.EqualValues(t, 2, g.Agreed)
	require.EqualValues(t, 1, g.Disagreed)
}

// An error result (no distribution) counts as a disagreement and stays
// out of Brier and ECE, as in eval.
func TestWindowCountsAnErrorResultAsWrong(t *testing.T) {
	t.Parallel()
	w := quality.New(quality.Config{})
	bad := stored("r1", "d1", "route", "tiny", 0.9, 0.1)
	bad.Record.Result.Probabilities = nil
	bad.Record.Result.Error = &decision.Error{Code: "engine", Message: "failed"}
	w.Observe(bad, label("a"))
	w.Observe(stored("r1", "d2", "route", "tiny", 1, 0), label("a"))
	g := w.Snapshot()[0]
	require.Equal(t, quality.Stats{Labels: 2, Valid: 1, Agreed: 1, Agreement: 0.5, Brier: 0, ECE: 0}, g.Window)
	require.EqualValues(t, 1, g.Disagreed)
}

// Observe and scrapes run at once from many goroutines (run under -race).
func TestWindowIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	w := quality.New(quality.Config{Size: 50})
	reg := prometheus.NewRegistry()
	reg.MustRegister(w)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				w.Observe(stored(fmt.Sprintf("r%d", g), fmt.Sprintf("d%d", i), "route", "tiny", 0.7, 0.3), label("a"))
				if i%10 == 0 {
					_, err := reg.Gather()
					require.NoError(t, err)
				}
			}
		}()
	}
	wg.Wait()
	g := w.Snapshot()[0]
	require.EqualValues(t, 800, g.Agreed)
	require.Equal(t, 50, g.Window.Labels)
}

// The collector exposes the counter and the window's gauges by kind and
// model.
func TestWindowMetrics(t *testing.T) {
	t.Parallel()
	w := quality.New(quality.Config{Size: 10})
	reg := prometheus.NewRegistry()
	reg.MustRegister(w)
	w.Observe(stored("r1", "d1", "route", "tiny", 0.8, 0.2), label("a"))
	w.Observe(stored("r1", "d2", "route", "tiny", 0.8, 0.2), label("b"))
	w.Observe(stored("r1", "d3", "route", "tiny", 0.6, 0.4), label("a"))
	got := gather(t, reg)
	g := w.Snapshot()[0].Window
	require.Equal(t, map[string]float64{
		`verdict_feedback_total{agree="false",kind="route",model="tiny"}`: 1,
		`verdict_feedback_total{agree="true",kind="route",model="tiny"}`:  2,
		`verdict_feedback_window_labels{kind="route",model="tiny"}`:       3,
		`verdict_feedback_agreement{kind="route",model="tiny"}`:           g.Agreement,
		`verdict_feedback_brier{kind="route",model="tiny"}`:               g.Brier,
		`verdict_feedback_ece{kind="route",model="tiny"}`:                 g.ECE,
	}, got)
	require.InDelta(t, 2.0/3, g.Agreement, 1e-12)
	// Brier: (0.04+0.04) + (0.64+0.64) + (0.16+0.16), over 3
	require.InDelta(t, 1.68/3, g.Brier, 1e-12)
}

// gather returns every sample as name{labels} → value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName() + "{"
			for i, l := range m.GetLabel() {
				if i > 0 {
					name += ","
				}
				name += fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
			}
			name += "}"
			switch {
			case m.Counter != nil:
				out[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[name] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// A label eval skips (an option called "unknown") is not measured live
// either.
func TestWindowSkipsWhatEvalSkips(t *testing.T) {
	t.Parallel()
	s := stored("r1", "d1", "route", "tiny", 0.4, 0.6)
	s.Record.Result.OptionIDs = []string{"known", eval.Unknown}
	_, ok := quality.ExampleOf(s, label(eval.Unknown))
	require.False(t, ok)
	w := quality.New(quality.Config{})
	w.Observe(s, label(eval.Unknown))
	require.Empty(t, w.Snapshot())
}
