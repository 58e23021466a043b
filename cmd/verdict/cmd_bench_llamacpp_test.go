//go:build cgo

package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBenchFlagErrorsNameTheFlag: bad bench flags are refused before any
// model is synthesized or loaded.
func TestBenchFlagErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", data, "--quant", "Q3_X"}, `flag --quant: unknown type "Q3_X"`},
		{[]string{"--data", data, "--quant", "Q8_0,,q4"}, `flag --quant: unknown type "q4"`},
		{[]string{"--data", data, "--prefill-threads", "0"}, "flag --prefill-threads"},
		{[]string{"--data", data, "--rounds", "0"}, "flag --rounds"},
		{[]string{"--data", data, "--settle", "-1s"}, "flag --settle"},
	} {
		require.ErrorContains(t, runBench(context.Background(), tc.args), tc.want, "%v", tc.args)
	}
}
