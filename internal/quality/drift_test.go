package quality_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/eval"
	"github.com/verdict-dev/verdict/internal/quality"
)

func TestDriftComparesOnlyFiguresWithAReference(t *testing.T) {
	t.Parallel()
	s := quality.Stats{Agreement: 0.70, ECE: 0.10}
	b := quality.Baseline{Agreement: quality.Reference{Value: 0.80, From: "first"}}
	got := quality.Drift(b, s, 0.05)
	require.Len(t, got, 1)
	require.Equal(t, "agreement", got[0].Metric)
	require.InDelta(t, -0.10, got[0].Delta, 1e-12)
	require.Empty(t, quality.Drift(b, s, 0.2), "within the margin")
	b.ECE = quality.Reference{Value: 0.02, From: "cal.json"}
	got = quality.Drift(b, s, 0.05)
	require.Len(t, got, 2)
	require.Equal(t, "ece", got[1].Metric)
	require.Equal(t, "cal.json", got[1].From)
}

// labeled builds n examples and results of one group: the first good
// ones agree with their label at p=0.9, the rest disagree at p=0.9.
func labeled(t *testing.T, kind string, good, bad int) ([]eval.Example, []decision.Result) {
	var ex []eval.Example
	var rs []decision.Result
	for i := range good + bad {
		s := stored("r", fmt.Sprintf("%s%d", kind, i), kind, "tiny", 0.9, 0.1)
		option := "a"
		if i >= good {
			option = "b"
		}
		ex = append(ex, example(t, s, option))
		rs = append(rs, s.Record.Result)
	}
	return ex, rs
}

// Windows end with the latest label (the oldest is partial), the first
// full window is the baseline, and a window that moved is drift.
func TestAssessWindowsEndWithTheLatestLabel(t *testing.T) {
	t.Parallel()
	ex, rs := labeled(t, "route", 9, 3) // 12 labels: windows 1-2, 3-7, 8-12
	got := quality.Assess(ex, rs, quality.AssessConfig{Size: 5, Margin: 0.05})
	require.Len(t, got, 1)
	a := got[0]
	require.Equal(t, quality.Key{Kind: "route", Model: "tiny"}, a.Key)
	require.Equal(t, quality.Measure(ex, 10), a.All)
	require.Len(t, a.Windows, 3)
	for i, w := range [][2]int{{1, 2}, {3, 7}, {8, 12}} {
		require.Equal(t, w, [2]int{a.Windows[i].First, a.Windows[i].Last})
		require.Equal(t, quality.Measure(ex[w[0]-1:w[1]], 10), a.Windows[i].Stats)
	}
	require.Equal(t, "the first full window (labels 3-7)", a.Baseline.Agreement.From)
	require.Equal(t, 1.0, a.Baseline.Agreement.Value)
	require.Empty(t, a.Windows[0].Drift)
	require.Empty(t, a.Windows[1].Drift)
	require.Len(t, a.Windows[2].Drift, 2, "labels 8-12: agreement 0.4 and ECE 0.5 against 1.0 and 0.1")
	require.True(t, a.Drift)

	live := quality.New(quality.Config{Size: 5})
	for i := range ex {
		s := stored("r", rs[i].ID, "route", "tiny", 0.9, 0.1)
		live.Observe(s, label(rs[i].OptionIDs[ex[i].Gold]))
	}
	require.Equal(t, a.Windows[2].Stats, live.Snapshot()[0].Window, "the last window is what the live gauges show")
}

// A calibration is the ECE reference of the groups all of whose results
// are of its model and prompt; the others say why not.
func TestAssessComparesECEWithTheCalibrationItIsPinnedTo(t *testing.T) {
	t.Parallel()
	ex, rs := labeled(t, "route", 4, 0)
	ex2, rs2 := labeled(t, "triage", 4, 0)
	rs2[0].PromptVersion = "v2"
	rs[1].CalibrationSHA256 = "cal"
	pin := &quality.Pin{Name: "cal.json", ModelSHA256: sha, PromptVersion: "v1", SHA256: "cal", ECE: 0.02}
	got := quality.Assess(append(ex, ex2...), append(rs, rs2...), quality.AssessConfig{Size: 10, Margin: 0.05, Calibration: pin})
	require.Len(t, got, 2)
	route, triage := got[0], got[1]
	require.Equal(t, "route", route.Kind)
	require.Equal(t, 4, route.Pinned)
	require.Equal(t, 1, route.Calibrated)
	require.Equal(t, quality.Reference{Value: 0.02, From: "cal.json (cross_validation.ece_after)"}, route.Baseline.ECE)
	require.Empty(t, route.Baseline.Agreement.From, "no full window")
	require.Len(t, route.Windows, 1)
	require.Equal(t, []quality.Finding{{Metric: "ece", Value: route.Windows[0].ECE, Reference: 0.02, Delta: route.Windows[0].ECE - 0.02,
		From: "cal.json (cross_validation.ece_after)"}}, route.Windows[0].Drift, "ECE 0.1 (p=0.9, all right) against 0.02")

	require.Equal(t, 3, triage.Pinned)
	require.Contains(t, triage.Note, "3 of 4 results are")
	require.Empty(t, triage.Baseline.ECE.From)
	require.False(t, triage.Drift)
}

// The oldest window, when it holds fewer labels than the others, is
// shown but not judged; the only window is judged, however small.
func TestAssessJudgesFullWindowsOrTheOnlyOne(t *testing.T) {
	t.Parallel()
	bad, badRs := labeled(t, "route", 0, 1)
	good, goodRs := labeled(t, "route", 5, 0)
	a := quality.Assess(append(bad, good...), append(badRs, goodRs...), quality.AssessConfig{Size: 5, Margin: 0.05})[0]
	require.Len(t, a.Windows, 2)
	require.Equal(t, 0.0, a.Windows[0].Agreement)
	require.Empty(t, a.Windows[0].Drift, "one label is too few to judge")
	require.False(t, a.Drift)

	pin := &quality.Pin{Name: "cal.json", ModelSHA256: sha, PromptVersion: "v1", ECE: 0}
	a = quality.Assess(bad, badRs, quality.AssessConfig{Size: 5, Margin: 0.05, Calibration: pin})[0]
	require.Len(t, a.Windows, 1)
	require.Len(t, a.Windows[0].Drift, 1, "ECE 0.9 against the calibration's 0")
}
