package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
)

// TestRunRoundsInterleavesModes: every round runs every mode once, so
// that a slow stretch of a shared machine hits all modes, and each round
// starts one mode later, so that no mode always follows the same one.
func TestRunRoundsInterleavesModes(t *testing.T) {
	var order []int
	mode := func(i int) func() (Row, error) {
		return func() (Row, error) { order = append(order, i); return Row{DecisionsPerSec: float64(i + 1)}, nil }
	}
	samples, err := runRounds(3, 0, []func() (Row, error){mode(0), mode(1), mode(2)})
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2, 1, 2, 0, 2, 0, 1}, order)
	require.Len(t, samples, 3)
	for i, s := range samples {
		require.Len(t, s, 3)
		for _, row := range s {
			require.Equal(t, float64(i+1), row.DecisionsPerSec, "mode %d's rows are its own", i)
		}
	}
}

func TestRunRoundsStopsAtTheFirstError(t *testing.T) {
	calls := 0
	boom := errors.New("boom")
	_, err := runRounds(3, 0, []func() (Row, error){
		func() (Row, error) { calls++; return Row{}, nil },
		func() (Row, error) { calls++; return Row{}, boom },
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 2, calls)
}

func TestSampleMedianIsARealRoundWithItsSpread(t *testing.T) {
	for _, tc := range []struct {
		name          string
		dps           []float64
		med, lo, hi   float64
		wantP50OfFrom int // the round whose other fields the row carries
	}{
		{"odd", []float64{5, 1, 3}, 3, 1, 5, 2},
		{"even takes the lower middle", []float64{4, 2}, 2, 2, 4, 1},
		{"one", []float64{7}, 7, 7, 7, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s sample
			for i, d := range tc.dps {
				s = append(s, Row{DecisionsPerSec: d, P50Ms: float64(100 + i)})
			}
			r := s.median()
			require.Equal(t, tc.med, r.DecisionsPerSec)
			require.Equal(t, tc.lo, r.DecisionsPerSecMin)
			require.Equal(t, tc.hi, r.DecisionsPerSecMax)
			require.Equal(t, len(tc.dps), r.Rounds)
			require.Equal(t, float64(100+tc.wantP50OfFrom), r.P50Ms, "the row is that round's measurement")
		})
	}
	// W0 rows: the prefill rate gets its own median and spread.
	s := sample{{DecisionsPerSec: 1, PrefillTokensPerSec: 300}, {DecisionsPerSec: 2, PrefillTokensPerSec: 100}, {DecisionsPerSec: 3, PrefillTokensPerSec: 200}}
	r := s.median()
	require.Equal(t, 200.0, r.PrefillTokensPerSec)
	require.Equal(t, 100.0, r.PrefillTokensPerSecMin)
	require.Equal(t, 300.0, r.PrefillTokensPerSecMax)
}

// TestFinishPairsRatiosWithinARound: the speed-up over fresh is the median
// of same-round ratios, so one round in which fresh alone was slowed (the
// machine was busy) cannot carry the ratio past what the rounds show.
func TestFinishPairsRatiosWithinARound(t *testing.T) {
	fresh := sample{{Mode: "fresh", DecisionsPerSec: 10, TokensSubmitted: 3000}, {Mode: "fresh", DecisionsPerSec: 2, TokensSubmitted: 3000}, {Mode: "fresh", DecisionsPerSec: 10, TokensSubmitted: 3000}}
	par := sample{{Mode: "parallel", DecisionsPerSec: 20}, {Mode: "parallel", DecisionsPerSec: 21}, {Mode: "parallel", DecisionsPerSec: 21}}
	var rep Report
	finish(&rep, 1000, 1800, 90, []sample{fresh, par})
	require.Len(t, rep.Rows, 2)
	p := rep.Rows[1]
	require.Equal(t, 3.0, p.TokenBound)
	require.InDelta(t, 2.1, p.SpeedupVsFresh, 1e-9, "median of 2.0, 10.5, 2.1")
	require.InDelta(t, 2.0, p.SpeedupMin, 1e-9)
	require.InDelta(t, 10.5, p.SpeedupMax, 1e-9)
	require.InDelta(t, 0.7, p.OfBound, 1e-9)
	require.Equal(t, 1.0, rep.Rows[0].SpeedupVsFresh)
}

// together takes same-round ratios and calls a mode slower only when
// even its best round is below alone's.
func TestTogetherNote(t *testing.T) {
	alone := sample{{DecisionsPerSec: 10}, {DecisionsPerSec: 10}, {DecisionsPerSec: 5}}
	mixed := sample{{DecisionsPerSec: 9}, {DecisionsPerSec: 11}, {DecisionsPerSec: 5}}
	require.Equal(t, "x: 1.00x [0.90–1.10] (not slower)", together("x", alone, mixed))
	slow := sample{{DecisionsPerSec: 9}, {DecisionsPerSec: 8}, {DecisionsPerSec: 4}}
	require.Equal(t, "x: 0.80x [0.80–0.90] (SLOWER in every round)", together("x", alone, slow))
}

// cpuClock is a fake /proc/stat: every read advances the total by 100
// ticks, of which idle are idle.
type cpuClock struct {
	idle, reads  int
	idleT, total uint64
}

func (c *cpuClock) read() (uint64, uint64, bool) {
	c.reads++
	c.idleT += uint64(c.idle)
	c.total += 100
	return c.idleT, c.total, true
}

// Quiet returns once the CPUs are idle, and not before its bound while
// they are busy; a done context or no bound ends it at once. The CPU
// times are a fake, so the outcome depends on no load or clock.
func TestQuietWaitsForIdleCPUsWithinItsBound(t *testing.T) {
	t.Parallel()
	busy := &cpuClock{idle: 0}
	waited := quiet(context.Background(), 20*time.Millisecond, time.Millisecond, busy.read)
	require.GreaterOrEqual(t, waited, 20*time.Millisecond, "busy CPUs: waits its whole bound")
	require.GreaterOrEqual(t, busy.reads, 4, "sampled more than once")

	idle := &cpuClock{idle: 95}
	require.Less(t, quiet(context.Background(), time.Hour, time.Millisecond, idle.read), time.Hour)
	require.Equal(t, 2, idle.reads, "idle CPUs: one window and done")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.Less(t, quiet(ctx, time.Hour, time.Hour, busy.read), time.Hour, "a done context ends the wait")
	require.Zero(t, Quiet(context.Background(), 0), "no bound: no wait")
}

// Interleaved: within each run of k states, one question of each in turn;
// every decision once.
func TestInterleaved(t *testing.T) {
	g := func(state string, n int) []decision.Decision {
		var ds []decision.Decision
		for i := 0; i < n; i++ {
			ds = append(ds, decision.Decision{ID: fmt.Sprint(state, i)})
		}
		return ds
	}
	var ids []string
	for _, d := range Interleaved([][]decision.Decision{g("a", 2), g("b", 3), g("c", 1), g("d", 2)}, 2) {
		ids = append(ids, d.ID)
	}
	require.Equal(t, []string{"a0", "b0", "a1", "b1", "b2", "c0", "d0", "d1"}, ids)
	require.Empty(t, Interleaved(nil, 4))
}

// JevBench-240's path may name the cases file or the folder that holds it.
func TestJevBenchCasesFileOrFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.Equal(t, filepath.Join(dir, "cases.jsonl"), JevBenchCases(dir))
	require.Equal(t, filepath.Join(dir, "cases.jsonl"), JevBenchCases(filepath.Join(dir, "cases.jsonl")))
	require.Equal(t, "missing/cases.jsonl", JevBenchCases("missing/cases.jsonl"))
}
