//go:build cgo

package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/gguf"
)

// TestModelQuantize quantizes a synthetic model to each type `verdict
// model quantize` offers, checks that the file says so and is smaller,
// that the engine loads and scores it close to the F32 original, and that
// bad requests are refused without leaving a file behind.
func TestModelQuantize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "f32.gguf")
	require.NoError(t, runModel(context.Background(), []string{"synth", "--shape", "tiny", "--seed", "3", "-o", in}))
	d := decision.Decision{ID: "q", State: decision.TextState("The invoice was paid twice."), Question: "Which team handles it?",
		Options: []decision.Option{{ID: "billing", Description: "Billing."}, {ID: "tech", Description: "Technical support."}, {ID: "sales", Description: "Sales."}}}
	score := func(path string) decision.Result {
		eng, err := llamacpp.New(llamacpp.Options{ModelPath: path, Threads: 2})
		require.NoError(t, err)
		defer eng.Close()
		rs, err := eng.Score(context.Background(), []decision.Decision{d})
		require.NoError(t, err)
		require.Nil(t, rs[0].Error)
		return rs[0]
	}
	ref := score(in)
	inInfo, err := gguf.Inspect(in, false)
	require.NoError(t, err)

	for _, typ := range llamacpp.QuantTypeNames() {
		out := filepath.Join(dir, typ+".gguf")
		require.NoError(t, runModel(context.Background(), []string{"quantize", "--type", typ, in, "-o", out}), typ)
		info, err := gguf.Inspect(out, false)
		require.NoError(t, err)
		require.Equal(t, typ, info.Quantization)
		require.Less(t, info.SizeBytes, inInfo.SizeBytes/2, "%s is smaller than F32", typ)
		r := score(out)
		require.Equal(t, typ, r.Model.Quantization)
		sum, worst := 0.0, 0.0
		for i, p := range r.Probabilities {
			sum += p
			worst = math.Max(worst, math.Abs(p-ref.Probabilities[i]))
		}
		require.InDelta(t, 1, sum, 1e-6)
		t.Logf("%s: max |Δp| against F32 = %.4f", typ, worst)
		require.Less(t, worst, 0.25, "%s scores far from F32", typ)
		_, err = os.Stat(out + ".partial")
		require.True(t, os.IsNotExist(err), "no partial file left")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"quantize", "--type", "Q3_X", in, "-o", filepath.Join(dir, "x.gguf")}, "flag --type"},
		{[]string{"quantize", in, "-o", filepath.Join(dir, "x.gguf")}, "flag --type: required"},
		{[]string{"quantize", "--type", "Q8_0", in}, "flag -o"},
		{[]string{"quantize", "--type", "Q8_0", in, "-o", in}, "is the input file"},
		{[]string{"quantize", "--type", "Q8_0", in, "-o", filepath.Join(dir, "Q8_0.gguf")}, "exists"},
		{[]string{"quantize", "--type", "Q8_0", filepath.Join(dir, "missing.gguf"), "-o", filepath.Join(dir, "x.gguf")}, "missing.gguf"},
	} {
		err := runModel(context.Background(), tc.args)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
	_, err = os.Stat(filepath.Join(dir, "x.gguf"))
	require.True(t, os.IsNotExist(err), "refused runs write nothing")
}
