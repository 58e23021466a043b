//go:build cgo

package bench

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/tune"
)

// runPrefill measures prefill speed on one ~300-token prompt, fresh, at
// each thread count, the thread counts interleaved in rounds. Where the
// engine reads the weights into memory by default (on huge pages, see
// llamacpp.Options.Mmap), each thread count also gets a row with the file
// mapped, so that the two sit side by side in the same rounds.
func runPrefill(ctx context.Context, cfg Config, rep *Report) error {
	read := llamacpp.Options{GPULayers: cfg.GPULayers}.WithDefaults().Mmap == "off"
	var modes []func() (Row, error)
	for _, th := range cfg.PrefillThreads {
		modes = append(modes, func() (Row, error) { return prefillRow(ctx, cfg, th, "") })
		if read {
			modes = append(modes, func() (Row, error) { return prefillRow(ctx, cfg, th, "on") })
		}
	}
	samples, err := runRounds(cfg.Rounds, cfg.Settle, modes)
	if err != nil {
		return err
	}
	for _, s := range samples {
		rep.Rows = append(rep.Rows, s.median())
	}
	return nil
}

// prefillRow is W0 at one thread count, on an engine of its own; mmap is
// the engine's Mmap ("" its default).
func prefillRow(ctx context.Context, cfg Config, threads int, mmap string) (Row, error) {
	e, err := llamacpp.New(llamacpp.Options{ModelPath: cfg.PrefillModel, Threads: threads, GPULayers: cfg.GPULayers, NoPrefixCache: true,
		FlashAttention: cfg.FlashAttention, Mmap: mmap})
	if err != nil {
		return Row{}, err
	}
	defer e.Close()
	mode := "fresh"
	if mmap == "on" {
		mode = "fresh, mapped"
	}
	d, err := fixedPrompt(e, 300)
	if err != nil {
		return Row{}, err
	}
	fmt.Fprintf(cfg.Log, "W0 prefill: threads=%d, %s\n", threads, mode)
	if _, err := scoreChecked(ctx, e, []decision.Decision{d}); err != nil { // warm-up
		return Row{}, err
	}
	const reps = 3
	before := e.Stats()
	start := time.Now()
	lat, tokens, err := prefillReps(ctx, e, d, reps)
	if err != nil {
		return Row{}, err
	}
	wall := time.Since(start)
	after := e.Stats()
	decodeS := float64(after.DecodeNanos-before.DecodeNanos) / 1e9
	return Row{
		Workload: "W0 prefill", Mode: mode, Model: e.Identity().Name, Threads: threads, Decisions: reps,
		WallSeconds: wall.Seconds(), DecisionsPerSec: reps / wall.Seconds(),
		P50Ms: pct(lat, 50), P95Ms: pct(lat, 95),
		TokensSubmitted:     after.TokensSubmitted - before.TokensSubmitted,
		TokensEvaluated:     after.TokensEvaluated - before.TokensEvaluated,
		DecodeShare:         decodeS / wall.Seconds(),
		PrefillTokensPerSec: float64(after.TokensEvaluated-before.TokensEvaluated) / decodeS,
		PromptTokens:        tokens,
	}, nil
}

// measure runs fn and fills the counters of a row from the engine's stats.
func measure(e *llamacpp.Engine, row *Row, fn func() ([]time.Duration, error)) error {
	return measureAll([]*llamacpp.Engine{e}, row, func() ([]time.Duration, time.Duration, error) {
		lat, err := fn()
		return lat, 0, err
	})
}

// runGrouped runs a workload of decisions grouped by shared state.
func runGrouped(ctx context.Context, cfg Config, rep *Report, name string, groups [][]decision.Decision, fresh *llamacpp.Engine,
	newEngine func(noCache bool) (*llamacpp.Engine, error), threads int) error {
	var all []decision.Decision
	for _, g := range groups {
		all = append(all, g...)
	}
	model := fresh.Identity().Name
	mk := func(mode string) Row {
		return Row{Workload: name, Mode: mode, Model: model, Threads: threads, Decisions: len(all)}
	}
	fmt.Fprintf(cfg.Log, "%s: %d states, %d decisions, %d rounds\n", name, len(groups), len(all), cfg.Rounds)
	// Every cached mode gets a new engine per round: a cold prefix cache.
	cached := func(mode string, run func(sc engine.Scorer) ([]time.Duration, error), wrap func(*llamacpp.Engine) engine.Scorer) func() (Row, error) {
		return func() (Row, error) {
			fmt.Fprintf(cfg.Log, "%s: %s\n", name, mode)
			e, err := newEngine(false)
			if err != nil {
				return Row{}, err
			}
			defer e.Close()
			row := mk(mode)
			err = measure(e, &row, func() ([]time.Duration, error) { return run(wrap(e)) })
			return row, err
		}
	}
	plain := func(e *llamacpp.Engine) engine.Scorer { return e }
	modes := []func() (Row, error){
		func() (Row, error) {
			fmt.Fprintf(cfg.Log, "%s: fresh\n", name)
			row := mk("fresh")
			err := measure(fresh, &row, func() ([]time.Duration, error) { return scoreOne(ctx, fresh, all) })
			return row, err
		},
		cached("serial", func(sc engine.Scorer) ([]time.Duration, error) { return scoreOne(ctx, sc, all) }, plain),
		cached("parallel", func(sc engine.Scorer) ([]time.Duration, error) { return scoreGroups(ctx, sc, groups) }, plain),
		// Four conversations at a time, their questions taking turns (an
		// agent backend's pattern): what the prefix cache keeps between
		// uses decides whether each turn re-prefills its state.
		cached(fmt.Sprintf("interleaved x%d", interleaveWidth), func(sc engine.Scorer) ([]time.Duration, error) {
			return scoreOne(ctx, sc, Interleaved(groups, interleaveWidth))
		}, plain),
	}
	if cfg.Debias >= 2 {
		// The parallel mode again, each decision under cfg.Debias option
		// orders (package tune): the state is prefilled once per group, so
		// the extra cost is question-suffix tokens only.
		modes = append(modes, cached(fmt.Sprintf("parallel+debias%d", cfg.Debias),
			func(sc engine.Scorer) ([]time.Duration, error) { return scoreGroups(ctx, sc, groups) },
			func(e *llamacpp.Engine) engine.Scorer { return tune.New(e, tune.Config{Debias: cfg.Debias}) }))
	}
	samples, err := runRounds(cfg.Rounds, cfg.Settle, modes)
	if err != nil {
		return err
	}
	rep.Notes = append(rep.Notes, together(name+": a state's questions in one call (parallel) vs one at a time (serial)", samples[1], samples[2]),
		together(fmt.Sprintf("%s: %d states' questions taking turns (interleaved) vs state by state (serial)", name, interleaveWidth), samples[1], samples[3]))
	minimal, ap, as := minimalTokens(fresh, groups)
	finish(rep, minimal, ap, as, samples)
	return nil
}

// minimalTokens is the least a perfect engine must evaluate: each distinct
// state prefix once, plus every decision's own suffix. It also returns the
// mean prefix and suffix lengths.
func minimalTokens(e *llamacpp.Engine, groups [][]decision.Decision) (n int64, avgPrefix, avgSuffix float64) {
	var decisions, prefixes, suffixes int
	for _, g := range groups {
		for i, d := range g {
			p, s, err := e.PromptTokens(d)
			if err != nil {
				continue
			}
			if i == 0 {
				n += int64(p)
			}
			n += int64(s)
			prefixes += p
			suffixes += s
			decisions++
		}
	}
	if decisions > 0 {
		avgPrefix, avgSuffix = float64(prefixes)/float64(decisions), float64(suffixes)/float64(decisions)
	}
	return n, avgPrefix, avgSuffix
}

// runIndependent runs W3: decisions with no shared state, one at a time
// versus Concurrency callers at once.
func runIndependent(ctx context.Context, cfg Config, rep *Report, fresh *llamacpp.Engine, threads int) error {
	ds, err := independent(fresh, cfg.Independent, cfg.IndependentTokens)
	if err != nil {
		return err
	}
	model := fresh.Identity().Name
	mk := func(mode string) Row {
		return Row{Workload: "W3 independent", Mode: mode, Model: model, Threads: threads, Decisions: len(ds)}
	}
	fmt.Fprintf(cfg.Log, "W3 independent: %d decisions, %d rounds\n", len(ds), cfg.Rounds)
	one := func() (Row, error) {
		fmt.Fprintf(cfg.Log, "W3 independent: fresh\n")
		row := mk("fresh")
		err := measure(fresh, &row, func() ([]time.Duration, error) { return scoreOne(ctx, fresh, ds) })
		return row, err
	}
	modes := []func() (Row, error){one}
	for _, n := range cfg.Clients {
		modes = append(modes, func() (Row, error) {
			fmt.Fprintf(cfg.Log, "W3 independent: parallel (%d callers)\n", n)
			row := mk(fmt.Sprintf("parallel x%d", n))
			err := measure(fresh, &row, func() ([]time.Duration, error) { return concurrently(ctx, fresh, ds, n) })
			return row, err
		})
	}
	samples, err := runRounds(cfg.Rounds, cfg.Settle, modes)
	if err != nil {
		return err
	}
	for i, n := range cfg.Clients {
		rep.Notes = append(rep.Notes, together(fmt.Sprintf("W3 %d callers at once vs one at a time", n), samples[0], samples[1+i]))
	}

	groups := make([][]decision.Decision, len(ds))
	for i := range ds {
		groups[i] = ds[i : i+1]
	}
	minimal, ap, as := minimalTokens(fresh, groups)
	finish(rep, minimal, ap, as, samples)
	return nil
}

// concurrently scores ds as single decisions from callers goroutines at
// once, and returns each call's latency.
func concurrently(ctx context.Context, sc engine.Scorer, ds []decision.Decision, callers int) ([]time.Duration, error) {
	return FanOut(len(ds), callers, func(i int) error {
		_, err := scoreChecked(ctx, sc, ds[i:i+1])
		return err
	})
}

func pct(lat []time.Duration, p int) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return float64(s[i].Microseconds()) / 1000
}
