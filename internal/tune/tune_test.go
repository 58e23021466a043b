package tune_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/calibrate"
	"github.com/verdict-dev/verdict/internal/eval"
	"github.com/verdict-dev/verdict/internal/tune"
	"github.com/verdict-dev/verdict/policy"
)

const modelSHA = "1111111111111111111111111111111111111111111111111111111111111111"

// fakeEngine stands in for llama.cpp (exercised in cmd/verdict's llamacpp
// tests): each option's logit is score(option id) + bias[position], so a
// fixed bias per answer position can be added; results carry a model and
// prompt identity like the real engine's, at temperature 1.
type fakeEngine struct {
	score func(id string) float64
	bias  []float64
	calls [][]string
}

func (f *fakeEngine) Score(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
	rs := make([]decision.Result, len(ds))
	var call []string
	for i, d := range ds {
		lg := make([]float64, len(d.Options))
		for j, o := range d.Options {
			lg[j] = f.score(o.ID)
			if j < len(f.bias) {
				lg[j] += f.bias[j]
			}
		}
		call = append(call, strings.Join(d.OptionIDs(), ""))
		rs[i] = decision.Result{ID: d.ID, OptionIDs: d.OptionIDs(), OptionLogits: lg, Temperature: 1, PromptVersion: "verdict-v1/chatml",
			Model: &decision.ModelIdentity{SHA256: modelSHA}, Tokens: &decision.Tokens{Input: 100, StatePrefix: 80, Evaluated: 20}}
	}
	f.calls = append(f.calls, call)
	return rs, nil
}

func dec(id string, opts ...string) decision.Decision {
	d := decision.Decision{ID: id, State: decision.TextState("s"), Question: "q?"}
	for _, o := range opts {
		d.Options = append(d.Options, decision.Option{ID: o})
	}
	return d
}

func writeCal(t *testing.T, temp float64, sha, prompt string) *calibrate.Loaded {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cal.json")
	f := calibrate.File{ModelSHA256: sha, PromptVersion: prompt, Temperature: temp}
	require.NoError(t, f.Write(path))
	l, err := calibrate.Load(path)
	require.NoError(t, err)
	return l
}

// TestTemperaturePrecedenceEveryCombination: calibration file > the
// kind's own temperature > --temperature > the policy file's top-level
// temperature > 1, for all sixteen combinations, through the scorer and
// then the policy flow (which must keep it).
func TestTemperaturePrecedenceEveryCombination(t *testing.T) {
	t.Parallel()
	cal := writeCal(t, 3, modelSHA, "verdict-v1/chatml")
	for _, c := range []struct {
		cal              *calibrate.Loaded
		kind, flag, file float64
		want             float64
		source           string
	}{
		{nil, 0, 0, 0, 1, tune.SourceDefault},
		{nil, 0, 4, 0, 4, tune.SourceFlag},
		{nil, 2, 0, 0, 2, tune.SourcePolicy},
		{nil, 2, 4, 0, 2, tune.SourcePolicy},
		{nil, 0, 0, 5, 5, tune.SourcePolicy},
		{nil, 0, 4, 5, 4, tune.SourceFlag}, // a policy default never replaces the flag
		{nil, 2, 0, 5, 2, tune.SourcePolicy},
		{nil, 2, 4, 5, 2, tune.SourcePolicy},
		{cal, 0, 0, 0, 3, tune.SourceCalibration},
		{cal, 0, 4, 0, 3, tune.SourceCalibration},
		{cal, 2, 0, 0, 3, tune.SourceCalibration},
		{cal, 2, 4, 0, 3, tune.SourceCalibration},
		{cal, 0, 0, 5, 3, tune.SourceCalibration},
		{cal, 0, 4, 5, 3, tune.SourceCalibration},
		{cal, 2, 0, 5, 3, tune.SourceCalibration},
		{cal, 2, 4, 5, 3, tune.SourceCalibration},
	} {
		name := fmt.Sprintf("cal=%v kind=%v flag=%v file=%v", c.cal != nil, c.kind, c.flag, c.file)
		got, src := tune.Resolve(c.cal, c.kind, c.flag, c.file)
		require.Equal(t, c.want, got, name)
		require.Equal(t, c.source, src, name)

		yaml := ""
		if c.file > 0 {
			yaml = fmt.Sprintf("temperature: %v\n", c.file)
		}
		if c.kind > 0 {
			yaml += fmt.Sprintf("kinds: {default: {temperature: %v}}\n", c.kind)
		} else {
			yaml += "kinds: {default: {}}\n"
		}
		pol, err := policy.Parse([]byte(yaml))
		require.NoError(t, err)
		eng := &fakeEngine{score: func(id string) float64 {
			if id == "a" {
				return 2
			}
			return 0
		}}
		sc := tune.New(eng, tune.Config{Calibration: c.cal, Temperature: c.flag})
		rs, err := pol.Apply(context.Background(), policy.Caller{}, []decision.Decision{dec("x", "a", "b")}, sc.Score)
		require.NoError(t, err)
		r := rs[0]
		require.Equal(t, c.want, r.Temperature, name)
		require.Equal(t, c.source, r.TemperatureSource, name)
		require.InDelta(t, 1/(1+math.Exp(-2/c.want)), r.Probabilities[0], 1e-12, name)
		require.Equal(t, c.cal != nil, r.Calibrated, name)
		if c.cal != nil {
			require.Equal(t, c.cal.SHA256, r.CalibrationSHA256)
		} else {
			require.Empty(t, r.CalibrationSHA256)
		}
		require.Equal(t, decision.StatusDecided, r.Outcome.Status)
	}
}

func TestCalibrationPinnedToAnotherModelOrPromptIsRefusedPerResult(t *testing.T) {
	t.Parallel()
	eng := &fakeEngine{score: func(string) float64 { return 0 }}
	for _, cal := range []*calibrate.Loaded{
		writeCal(t, 2, strings.Repeat("2", 64), "verdict-v1/chatml"),
		writeCal(t, 2, modelSHA, "verdict-v1/plain"),
	} {
		rs, err := tune.New(eng, tune.Config{Calibration: cal}).Score(context.Background(), []decision.Decision{dec("x", "a", "b")})
		require.NoError(t, err)
		require.NotNil(t, rs[0].Error)
		require.EqualValues(t, "calibration", rs[0].Error.Code)
		require.Empty(t, rs[0].Probabilities)
	}
}

func TestRotationsPrecedence(t *testing.T) {
	t.Parallel()
	d := dec("x", "a", "b", "c", "d")
	require.Equal(t, 1, tune.Rotations(&d, 0))
	require.Equal(t, 3, tune.Rotations(&d, 3))
	require.Equal(t, 4, tune.Rotations(&d, 9), "capped at the options")
	d.KindDebias = 2
	require.Equal(t, 2, tune.Rotations(&d, 3), "kind over flag")
	d.Debias = 1
	require.Equal(t, 1, tune.Rotations(&d, 3), "request over kind: 1 = off")
	d.Debias = 4
	require.Equal(t, 4, tune.Rotations(&d, 0))
}

func TestDebiasSharesOneCallAndReportsIt(t *testing.T) {
	t.Parallel()
	eng := &fakeEngine{score: func(id string) float64 { return map[string]float64{"a": 1, "b": 0, "c": -1}[id] }}
	d := dec("x", "a", "b", "c")
	d.Debias = 3
	rs, err := tune.New(eng, tune.Config{}).Score(context.Background(), []decision.Decision{d, dec("y", "a", "b")})
	require.NoError(t, err)
	require.Equal(t, [][]string{{"abc", "bca", "cab", "ab"}}, eng.calls, "rotations in the same engine call")
	r := rs[0]
	require.Equal(t, &decision.Debias{Rotations: 3, Agreement: 1}, r.Debias)
	require.Equal(t, []string{"a", "b", "c"}, r.OptionIDs)
	require.Equal(t, "a", r.Chosen)
	require.Equal(t, 60, r.Tokens.Evaluated, "three suffixes evaluated")
	require.Nil(t, rs[1].Debias)
	// No bias: mean log-softmax = log-softmax of the scores.
	z := math.Log(math.Exp(1) + 1 + math.Exp(-1))
	require.InDeltaSlice(t, []float64{1 - z, -z, -1 - z}, r.OptionLogits, 1e-12)
}

// TestDebiasRemovesAFixedPositionBias: an engine that adds a fixed bias per
// answer position (A gets +3) is position-biased; with debias over all
// rotations every option sits at every position once, so the bias cancels
// exactly and the answers' positions follow gold's.
func TestDebiasRemovesAFixedPositionBias(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 5))
	scores := map[string]float64{}
	var ds []decision.Decision
	var golds []int
	for i := range 400 {
		d := dec(fmt.Sprint(i), "w", "x", "y", "z")
		for j := range d.Options {
			d.Options[j].ID = fmt.Sprintf("o%d-%d", i, j)
			scores[d.Options[j].ID] = rng.NormFloat64()
		}
		g := 0
		for j := range d.Options {
			if scores[d.Options[j].ID] > scores[d.Options[g].ID] {
				g = j
			}
		}
		ds = append(ds, d)
		golds = append(golds, g)
	}
	eng := &fakeEngine{score: func(id string) float64 { return scores[id] }, bias: []float64{3, 1, 0, 0}}
	run := func(k int) []eval.Example {
		rs, err := tune.New(eng, tune.Config{Debias: k}).Score(context.Background(), ds)
		require.NoError(t, err)
		ex := make([]eval.Example, len(rs))
		for i, r := range rs {
			ex[i] = eval.Example{Options: r.OptionIDs, Gold: golds[i], Probs: r.Probabilities}
		}
		return ex
	}
	biased, _ := eval.PositionBias(run(0))
	fixed, pos := eval.PositionBias(run(4))
	require.Greater(t, biased, 0.4)
	require.InDelta(t, 0, fixed, 1e-12)
	for _, p := range pos {
		require.Equal(t, p.Gold, p.Chosen)
	}
	require.InDelta(t, 1, eval.Accuracy(run(4)), 1e-12)
}
