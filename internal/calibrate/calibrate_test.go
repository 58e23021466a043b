package calibrate_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/calibrate"
)

// synthetic draws logits and a gold option sampled from softmax(logits/t):
// data generated with temperature t.
func synthetic(n int, t float64, seed uint64) []calibrate.Sample {
	rng := rand.New(rand.NewPCG(seed, 7))
	ss := make([]calibrate.Sample, n)
	for i := range ss {
		lg := make([]float64, 4)
		for j := range lg {
			lg[j] = 3 * rng.NormFloat64()
		}
		p := calibrate.Probs(lg, t)
		u, g := rng.Float64(), 0
		for g < len(p)-1 && u > p[g] {
			u -= p[g]
			g++
		}
		ss[i] = calibrate.Sample{Logits: lg, Gold: g}
	}
	return ss
}

func TestFitTemperatureRecoversTheGeneratingTemperature(t *testing.T) {
	t.Parallel()
	for _, want := range []float64{0.5, 1, 2.5} {
		got := calibrate.FitTemperature(synthetic(6000, want, 1))
		require.InDelta(t, want, got, 0.08*want, "generated at T=%v", want)
	}
}

func TestCrossValidationImprovesAnOverconfidentModel(t *testing.T) {
	t.Parallel()
	ss := synthetic(3000, 3, 2) // logits 3x too sharp at T=1
	cv := calibrate.CrossValidate(ss, 5, 10)
	require.Equal(t, 5, cv.Folds)
	require.Len(t, cv.FoldTemperatures, 5)
	require.Greater(t, cv.ECEBefore, 0.1)
	require.Less(t, cv.ECEAfter, 0.03)
	require.Less(t, cv.NLLAfter, cv.NLLBefore)
}

func TestThresholdsByHand(t *testing.T) {
	t.Parallel()
	// Top probabilities at T=1 (two options, gold first unless marked):
	// logits ln(p/(1-p)) give p exactly.
	mk := func(p float64, right bool) calibrate.Sample {
		g := 0
		if !right {
			g = 1
		}
		return calibrate.Sample{Logits: []float64{logit(p), 0}, Gold: g}
	}
	ss := []calibrate.Sample{mk(0.95, true), mk(0.9, true), mk(0.8, false), mk(0.7, true), mk(0.6, false)}
	th := calibrate.Thresholds(ss, 1, []float64{1, 0.75, 0.6, 0.99999})
	// ≥.95: 1/1; ≥.9: 2/2; ≥.8: 2/3; ≥.7: 3/4=.75; ≥.6: 3/5=.6
	require.InDelta(t, 0.9, th[0].MinProbability, 1e-9)
	require.InDelta(t, 0.4, th[0].Coverage, 1e-9)
	require.InDelta(t, 0.7, th[1].MinProbability, 1e-9)
	require.InDelta(t, 0.75, th[1].Accuracy, 1e-9)
	require.InDelta(t, 0.8, th[1].Coverage, 1e-9)
	require.InDelta(t, 0.6, th[2].MinProbability, 1e-9)
	require.InDelta(t, 1.0, th[2].Coverage, 1e-9)
	require.True(t, th[3].Reached)
}

func logit(p float64) float64 {
	return ln(p) - ln(1-p)
}

func TestLoadAndPinCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "cal.json")
	sha := strings.Repeat("ab", 32)
	f := calibrate.File{ModelSHA256: sha, PromptVersion: "verdict-v1/chatml", Temperature: 1.7, Samples: 10}
	require.NoError(t, f.Write(path))
	l, err := calibrate.Load(path)
	require.NoError(t, err)
	require.Len(t, l.SHA256, 64)
	require.Equal(t, 1.7, l.Temperature)
	require.NoError(t, l.Check(sha, "verdict-v1/chatml"))
	err = l.Check(strings.Repeat("cd", 32), "verdict-v1/chatml")
	require.ErrorIs(t, err, calibrate.ErrMismatch)
	require.ErrorContains(t, err, "pinned to model sha256 abababababab")
	require.ErrorIs(t, l.Check(sha, "verdict-v1/plain"), calibrate.ErrMismatch)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"format":"verdict-calibration/1","method":"temperature","model_sha256":"`+sha+`","prompt_version":"x","temperature":0}`), 0o644))
	_, err = calibrate.Load(bad)
	require.ErrorContains(t, err, "temperature: must be in")
}
