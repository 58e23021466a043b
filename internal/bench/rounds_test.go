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
	broken       bool // reads fail, as where there is no /proc/stat
}

func (c *cpuClock) read() (uint64, uint64, bool) {
	c.reads++
	c.idleT += uint64(c.idle)
	c.total += 100
	return c.idleT, c.total, !c.broken
}

// fakeClock is a clock whose Sleep returns at once, moving the time on by
// what it was asked to wait; it counts the waits.
type fakeClock struct {
	now     time.Time
	windows int
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	c.windows++
	c.now = c.now.Add(d)
	return true
}

// Quiet samples the CPUs a window at a time until they were idle over one,
// and no longer than its bound while they are busy; a done context, no
// bound or no CPU times end it. The CPU times and the clock are fakes, so
// the outcome depends on no load or clock of the machine: the test counts
// samples and windows.
func TestQuietWaitsForIdleCPUsWithinItsBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	busy, clk := &cpuClock{idle: 0}, &fakeClock{}
	quiet(ctx, 20*time.Millisecond, time.Millisecond, busy.read, clk)
	require.Equal(t, 20, clk.windows, "busy CPUs: windows until the bound")
	require.Equal(t, 40, busy.reads, "two samples a window")

	idle, clk := &cpuClock{idle: 95}, &fakeClock{}
	quiet(ctx, time.Hour, time.Millisecond, idle.read, clk)
	require.Equal(t, 1, clk.windows, "idle CPUs: one window and done")
	require.Equal(t, 2, idle.reads)

	half, clk := &cpuClock{idle: 89}, &fakeClock{}
	quiet(ctx, 5*time.Millisecond, time.Millisecond, half.read, clk)
	require.Equal(t, 5, clk.windows, "89% idle is not quiet")

	done, cancel := context.WithCancel(ctx)
	cancel()
	busy, clk = &cpuClock{idle: 0}, &fakeClock{}
	quiet(done, time.Hour, time.Millisecond, busy.read, clk)
	require.Zero(t, clk.windows, "a done context ends the wait")

	broken, clk := &cpuClock{broken: true}, &fakeClock{}
	quiet(ctx, time.Hour, time.Millisecond, broken.read, clk)
	require.Equal(t, 1, clk.windows, "no CPU times: one window")

	busy, clk = &cpuClock{idle: 0}, &fakeClock{}
	quiet(ctx, 0, time.Millisecond, busy.read, clk)
	require.Zero(t, busy.reads+clk.windows, "no bound: no wait")
}

// Interleave prepares each round before its modes, runs them in
// Rotation's order and stops at the first error, of a mode or of a
// round's preparation.
func TestInterleavePreparesEachRoundFirst(t *testing.T) {
	t.Parallel()
	var events []string
	begin := func(r int) error { events = append(events, fmt.Sprintf("begin %d", r)); return nil }
	run := func(r, i int) error { events = append(events, fmt.Sprintf("%d.%d", r, i)); return nil }
	require.NoError(t, Interleave(context.Background(), 2, 2, 0, begin, run))
	require.Equal(t, []string{"begin 0", "0.0", "0.1", "begin 1", "1.1", "1.0"}, events)

	events = nil
	boom := errors.New("boom")
	err := Interleave(context.Background(), 3, 2, 0, func(r int) error {
		if r == 1 {
			return boom
		}
		return begin(r)
	}, run)
	require.ErrorIs(t, err, boom)
	require.Equal(t, []string{"begin 0", "0.0", "0.1"}, events)
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
