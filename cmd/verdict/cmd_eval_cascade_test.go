package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEvalCascadeFlagErrors: a bad --cascade, --tolerance or a flag that
// does not apply to a cascade is refused before any model loads, and the
// error names the flag.
func TestEvalCascadeFlagErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"cases.jsonl", "gold.jsonl", "s.gguf", "b.gguf"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
	}
	s, b := filepath.Join(dir, "s.gguf"), filepath.Join(dir, "b.gguf")
	both := s + "," + b
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cascade", s}, `flag --cascade: want SMALL.gguf,BIG.gguf, got "` + s + `"`},
		{[]string{"--cascade", s + ","}, "flag --cascade: want SMALL.gguf,BIG.gguf"},
		{[]string{"--cascade", s + "," + b + "," + b}, "flag --cascade: want SMALL.gguf,BIG.gguf"},
		{[]string{"--cascade", s + "," + filepath.Join(dir, "missing.gguf")}, "flag --cascade: stat " + filepath.Join(dir, "missing.gguf")},
		{[]string{"--cascade", both, "--tolerance", "-0.1"}, "flag --tolerance: must be in [0, 1], got -0.1"},
		{[]string{"--cascade", both, "--tolerance", "2"}, "flag --tolerance: must be in [0, 1], got 2"},
		{[]string{"--cascade", both, "-m", s}, "flag --model: not with --cascade"},
		{[]string{"--cascade", both, "--predictions", s}, "flag --predictions: not with --cascade"},
		{[]string{"--cascade", both, "-o", filepath.Join(dir, "out.jsonl")}, "flag -o: not with --cascade"},
		{[]string{"--cascade", both, "--svg", filepath.Join(dir, "r.svg")}, "flag --svg: not with --cascade (its curve is --svg-cascade)"},
		{[]string{"--cascade", both, "--calibration", s}, "flag --calibration: not with --cascade"},
		{[]string{"--tolerance", "0.02"}, "flag --tolerance: needs --cascade SMALL.gguf,BIG.gguf"},
		{[]string{"--svg-cascade", filepath.Join(dir, "c.svg")}, "flag --svg-cascade: needs --cascade SMALL.gguf,BIG.gguf"},
	} {
		err := runEval(t.Context(), append([]string{dir, "--log-level", "warn"}, tc.args...))
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}
