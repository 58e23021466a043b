//go:build cgo

// Package bench measures the engine on fixed workloads: how many tokens it
// avoids evaluating (shared state prefixes, cached prefixes, batching) and
// what that buys in decisions per second. `verdict bench` prints its table.
//
// Each workload runs in three modes on the same model:
//
//   - fresh: every decision from scratch, one at a time (no prefix cache);
//   - serial: one decision at a time, cached prefixes reused;
//   - parallel: all questions about a state in one call (fan-out), or for
//     independent decisions, 16 concurrent callers batched by the engine.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/tune"
)

// Config says what to run.
type Config struct {
	// GPULayers is llamacpp.Options.GPULayers for every engine the bench
	// opens (0 = CPU; -1 = all layers on the GPU).
	GPULayers int
	// Model is the GGUF for W1–W3.
	Model string
	// PrefillModel is the GGUF for the prefill table (W0); empty skips it.
	PrefillModel string
	// Threads for W1–W3. Defaults to the number of CPUs.
	Threads int
	// PrefillThreads lists thread counts for W0. Defaults to 1 and 2.
	PrefillThreads []int
	// States is the number of W1 states. Defaults to 2.
	States int
	// Questions per W1 state. Defaults to 21.
	Questions int
	// StateTokens is the W1 state length. Defaults to Shape777StateTokens.
	StateTokens int
	// SuffixTokens is the W1 question suffix length. Defaults to
	// Shape777SuffixTokens.
	SuffixTokens int
	// JevBench is the cases.jsonl path for W2; empty or missing skips W2.
	JevBench string
	// JevLimit is the number of W2 cases. Defaults to 12.
	JevLimit int
	// Independent is the number of W3 decisions. Defaults to 64.
	Independent int
	// Clients lists the W3 concurrent-caller counts, one row each.
	// Defaults to 4 and 16.
	Clients []int
	// IndependentTokens is the W3 state length. Defaults to 200.
	IndependentTokens int
	// Workloads to run, by name (w0 w1 w2 w3). Defaults to all.
	Workloads []string
	// FlashAttention is passed to the engine ("auto", "on", "off").
	FlashAttention string
	// BranchBatchTokens is passed to the engine (0 = its default).
	BranchBatchTokens int
	// PrefixCacheTokens is passed to the engine (0 = its default).
	PrefixCacheTokens int
	// PrefixCacheStore is passed to the engine ("" = its default).
	PrefixCacheStore string
	// Settle bounds the wait before each mode for the machine to be quiet
	// (Quiet): 0 does not wait.
	Settle time.Duration
	// Debias adds a "parallel+debiasK" row to W1 and W2: the parallel mode
	// with every decision scored under K option orders (0 or 1 = no row).
	Debias int
	// Rounds is how many times every mode of a workload is measured, the
	// modes interleaved within each round so that a noisy machine slows
	// them alike; rows report the median round and the spread, and ratios
	// are taken between modes of the same round. Defaults to 3.
	Rounds int
	// Log receives progress lines. Defaults to io.Discard.
	Log io.Writer
}

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.States, 2)
	def(&c.Questions, 21)
	def(&c.StateTokens, Shape777StateTokens)
	def(&c.SuffixTokens, Shape777SuffixTokens)
	def(&c.JevLimit, 12)
	def(&c.Independent, 64)
	def(&c.IndependentTokens, 200)
	def(&c.Rounds, 3)
	if len(c.Clients) == 0 {
		c.Clients = []int{4, 16}
	}
	if len(c.PrefillThreads) == 0 {
		c.PrefillThreads = []int{1, 2}
	}
	if len(c.Workloads) == 0 {
		c.Workloads = []string{"w0", "w1", "w2", "w3"}
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Run runs the configured workloads.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	rep := &Report{Started: time.Now()}
	want := map[string]bool{}
	for _, w := range cfg.Workloads {
		want[strings.ToLower(w)] = true
	}
	if want["w0"] && cfg.PrefillModel != "" {
		if err := runPrefill(ctx, cfg, rep); err != nil {
			return rep, err
		}
	}
	if !want["w1"] && !want["w2"] && !want["w3"] {
		return rep, nil
	}
	// Engines start cold for every measurement: fresh has no prefix cache,
	// and each cached measurement gets a new engine so that it cannot
	// reuse prefixes another mode left behind.
	newEngine := func(noCache bool) (*llamacpp.Engine, error) {
		return llamacpp.New(llamacpp.Options{ModelPath: cfg.Model, Threads: cfg.Threads, GPULayers: cfg.GPULayers, NoPrefixCache: noCache, FlashAttention: cfg.FlashAttention, BranchBatchTokens: cfg.BranchBatchTokens, PrefixCacheTokens: cfg.PrefixCacheTokens, PrefixCacheStore: cfg.PrefixCacheStore})
	}
	fresh, err := newEngine(true)
	if err != nil {
		return rep, err
	}
	defer fresh.Close()
	threads := cfg.Threads
	if threads == 0 {
		threads = defaultThreads()
	}
	if want["w1"] {
		groups, err := shape777(fresh, cfg)
		if err != nil {
			return rep, err
		}
		if err := runGrouped(ctx, cfg, rep, "W1 shape-777", groups, fresh, newEngine, threads); err != nil {
			return rep, err
		}
	}
	if want["w2"] {
		groups, err := jevbench(cfg.JevBench, cfg.JevLimit)
		if err != nil {
			rep.Notes = append(rep.Notes, "W2 skipped: "+err.Error())
		} else if err := runGrouped(ctx, cfg, rep, "W2 jevbench-240", groups, fresh, newEngine, threads); err != nil {
			return rep, err
		}
	}
	if want["w3"] {
		if err := runIndependent(ctx, cfg, rep, fresh, threads); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func defaultThreads() int {
	o := llamacpp.Options{}
	return o.WithDefaults().Threads
}

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
	before := e.Stats()
	start := time.Now()
	lat, err := fn()
	if err != nil {
		return err
	}
	wall := time.Since(start)
	after := e.Stats()
	row.WallSeconds = wall.Seconds()
	row.DecisionsPerSec = float64(row.Decisions) / wall.Seconds()
	row.P50Ms, row.P95Ms = pct(lat, 50), pct(lat, 95)
	row.TokensSubmitted = after.TokensSubmitted - before.TokensSubmitted
	row.TokensEvaluated = after.TokensEvaluated - before.TokensEvaluated
	row.DecodeShare = float64(after.DecodeNanos-before.DecodeNanos) / 1e9 / wall.Seconds()
	return nil
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

// words is the vocabulary of synthetic bench text.
var wordList = strings.Fields(`customer account access password reset email billing payment sales support
refund request issue ticket team product feature failing deadline plan enterprise pro free urgent
critical high medium low user users data export error log service queue route order working
workaround problem help need please time day week month year after before because the of and to in
is it that for on with as was be by this are or from at an not have has but which what when who`)

// text returns deterministic pseudo-English of about n tokens of m.
func text(m *llamacpp.Engine, rng *rand.Rand, n int) (string, error) {
	var b strings.Builder
	for {
		for i := 0; i < 16; i++ {
			b.WriteString(wordList[rng.IntN(len(wordList))])
			b.WriteByte(' ')
		}
		b.WriteString(". ")
		count, err := m.TokenCount(b.String())
		if err != nil {
			return "", err
		}
		if count >= n {
			return strings.TrimSpace(b.String()), nil
		}
	}
}

// shape777 builds W1 from Shape777Requests: a group of decisions per
// state.
func shape777(e *llamacpp.Engine, cfg Config) ([][]decision.Decision, error) {
	bodies, err := Shape777Requests(e, cfg.States, cfg.Questions, cfg.StateTokens, cfg.SuffixTokens)
	if err != nil {
		return nil, err
	}
	var groups [][]decision.Decision
	for _, body := range bodies {
		req, err := decision.ParseSystemOne(body, decision.Limits{})
		if err != nil {
			return nil, err
		}
		groups = append(groups, req.Decisions())
	}
	return groups, nil
}

// The shape-777 workload's lengths in tokens: each state, and each
// question's suffix (question, options, cue).
const (
	Shape777StateTokens  = 1800
	Shape777SuffixTokens = 90
)

// Shape777Requests is the shape-777 workload as System One requests, one
// per state: states states of about stateTokens tokens, each with
// questions choice questions (four options) whose suffix (question,
// options, cue) is about suffixTokens tokens, measured with e's own
// tokenization. It is deterministic for a model: W1 and the peer
// benchmark send the same requests.
func Shape777Requests(e *llamacpp.Engine, states, questions, stateTokens, suffixTokens int) ([][]byte, error) {
	rng := rand.New(rand.NewPCG(777, 777))
	type question struct {
		Type         string            `json:"type"`
		Instructions string            `json:"instructions"`
		Criteria     map[string]string `json:"criteria"`
	}
	type request struct {
		State     string              `json:"state"`
		Questions map[string]question `json:"questions"`
	}
	var out [][]byte
	for s := 0; s < states; s++ {
		st, err := text(e, rng, stateTokens)
		if err != nil {
			return nil, err
		}
		req := request{State: st, Questions: map[string]question{}}
		for q := 0; q < questions; q++ {
			crit := map[string]string{}
			for o := 0; o < 4; o++ {
				crit[string(rune('a'+o))] = wordList[rng.IntN(len(wordList))]
			}
			// Grow the question until the suffix reaches its length.
			var words []string
			for {
				qq := question{Type: "choice", Instructions: strings.Join(words, " ") + "?", Criteria: crit}
				one, err := json.Marshal(request{State: st, Questions: map[string]question{"q": qq}})
				if err != nil {
					return nil, err
				}
				parsed, err := decision.ParseSystemOne(one, decision.Limits{})
				if err != nil {
					return nil, err
				}
				_, suffix, err := e.PromptTokens(parsed.Decisions()[0])
				if err != nil {
					return nil, err
				}
				if suffix >= suffixTokens {
					req.Questions[fmt.Sprintf("q%02d", q)] = qq
					break
				}
				words = append(words, wordList[rng.IntN(len(wordList))])
			}
		}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		out = append(out, body)
	}
	return out, nil
}

// independent builds W3: n decisions with distinct states of about
// tokens tokens.
func independent(m *llamacpp.Engine, n, tokens int) ([]decision.Decision, error) {
	rng := rand.New(rand.NewPCG(3, 3))
	var out []decision.Decision
	for i := 0; i < n; i++ {
		st, err := text(m, rng, tokens)
		if err != nil {
			return nil, err
		}
		out = append(out, decision.Decision{
			ID: fmt.Sprintf("ind-%d", i), State: decision.TextState(fmt.Sprintf("Ticket %d. %s", i, st)),
			Question: "Which team should handle this ticket?",
			Options: []decision.Option{{ID: "support", Description: "Customer support."}, {ID: "billing", Description: "Billing."},
				{ID: "engineering", Description: "Engineering."}, {ID: "sales", Description: "Sales."}},
		})
	}
	return out, nil
}

// fixedPrompt builds one decision whose prompt is about n tokens.
func fixedPrompt(m *llamacpp.Engine, n int) (decision.Decision, error) {
	rng := rand.New(rand.NewPCG(300, 300))
	st, err := text(m, rng, n-110)
	if err != nil {
		return decision.Decision{}, err
	}
	return decision.Decision{ID: "prefill", State: decision.TextState(st), Question: "Which team should handle this ticket?",
		Options: []decision.Option{{ID: "support", Description: "Customer support."}, {ID: "billing", Description: "Billing and payments."},
			{ID: "engineering", Description: "Engineering and incidents."}, {ID: "sales", Description: "Sales."}}}, nil
}

// jevbench reads up to limit cases of JevBench-240 as decision groups.
func jevbench(path string, limit int) ([][]decision.Decision, error) {
	if path == "" {
		return nil, fmt.Errorf("no --jevbench file given")
	}
	path = JevBenchCases(path)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("JevBench-240 is not at %s: %s", path, JevBenchHowTo)
	}
	if err != nil {
		return nil, err
	}
	var groups [][]decision.Decision
	for i, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if len(groups) == limit {
			break
		}
		var c struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		req, err := decision.ParseSystemOne([]byte(line), decision.Limits{})
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		ds := req.Decisions()
		for k := range ds {
			ds[k].ID = c.ID + "." + ds[k].ID
		}
		groups = append(groups, ds)
	}
	return groups, nil
}
