//go:build cgo

package bench

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/gguf"
)

// TestRunCascade runs W4 on two tiny models: the cascade row escalates the
// share asked for, through the policy's escalate clause, and evaluates
// more tokens than the big model alone only by the small model's pass;
// with an explicit bound of 1 every decision escalates.
func TestRunCascade(t *testing.T) {
	dir := t.TempDir()
	small, big := filepath.Join(dir, "small.gguf"), filepath.Join(dir, "big.gguf")
	require.NoError(t, gguf.Synth(small, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	require.NoError(t, gguf.Synth(big, gguf.SynthOptions{Shape: "tiny", Seed: 2}))
	run := func(below, share float64) (alone, cascade Row, rep *Report) {
		rep, err := Run(context.Background(), Config{Model: big, CascadeSmall: small, CascadeBelow: below, CascadeEscalate: share,
			CascadeDecisions: 8, IndependentTokens: 30, Threads: 1, Rounds: 2, Workloads: []string{"cascade"}})
		require.NoError(t, err)
		require.Len(t, rep.Rows, 2)
		return rep.Rows[0], rep.Rows[1], rep
	}
	alone, cascade, rep := run(0, 0.25)
	require.Equal(t, "big alone", alone.Mode)
	require.Equal(t, "cascade", cascade.Mode)
	require.Equal(t, 8, cascade.Decisions)
	require.InDelta(t, 0.25, cascade.EscalationRate, 1e-9, "two of eight escalate")
	require.Zero(t, alone.EscalationRate)
	require.Greater(t, cascade.DecisionsPerSec, 0.0)
	require.Equal(t, 1.0, alone.SpeedupVsFresh, "the big model alone is the baseline")
	// The small pass submits every decision once, the big one the two escalated.
	require.InDelta(t, float64(alone.TokensSubmitted)*(1+0.25), float64(cascade.TokensSubmitted), float64(alone.TokensSubmitted)*0.2)
	var table bytes.Buffer
	rep.WriteTable(&table)
	require.Contains(t, table.String(), "25% escalated")
	require.Contains(t, table.String(), "W4 cascade: cascade vs big alone")

	_, cascade, _ = run(1, 0)
	require.Equal(t, 1.0, cascade.EscalationRate, "a bound of 1 escalates every decision")

	// The small model on its own device setting (0: the CPU), as the
	// stack's CPU pool runs it in front of a GPU pool.
	cpu := 0
	rep, err := Run(context.Background(), Config{Model: big, CascadeSmall: small, CascadeSmallGPULayers: &cpu, CascadeEscalate: 0.5,
		CascadeDecisions: 4, IndependentTokens: 30, Threads: 1, Rounds: 1, Workloads: []string{"w4"}})
	require.NoError(t, err)
	require.Len(t, rep.Rows, 2)
	require.InDelta(t, 0.5, rep.Rows[1].EscalationRate, 1e-9)
}
