package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Row is one workload in one mode.
type Row struct {
	Workload        string  `json:"workload"`
	Mode            string  `json:"mode"`
	Model           string  `json:"model"`
	Threads         int     `json:"threads"`
	Decisions       int     `json:"decisions"`
	WallSeconds     float64 `json:"wall_s"`
	DecisionsPerSec float64 `json:"decisions_per_s"`
	// Rounds is the number of measurements; DecisionsPerSec is their
	// median, DecisionsPerSecMin and Max their spread.
	Rounds             int     `json:"rounds"`
	DecisionsPerSecMin float64 `json:"decisions_per_s_min"`
	DecisionsPerSecMax float64 `json:"decisions_per_s_max"`
	P50Ms              float64 `json:"p50_ms"`
	P95Ms              float64 `json:"p95_ms"`
	TokensSubmitted    int64   `json:"tokens_submitted"`
	TokensEvaluated    int64   `json:"tokens_evaluated"`
	MinimalTokens      int64   `json:"minimal_tokens"`
	// TokenBound is fresh tokens ÷ minimal tokens: the best speed-up over
	// fresh that avoiding work alone can give.
	TokenBound float64 `json:"token_bound"`
	// SpeedupVsFresh is the median over rounds of decisions/s over the
	// fresh mode's in the same round; SpeedupMin and Max are the spread.
	SpeedupVsFresh float64 `json:"speedup_vs_fresh"`
	SpeedupMin     float64 `json:"speedup_min"`
	SpeedupMax     float64 `json:"speedup_max"`
	// OfBound is SpeedupVsFresh ÷ TokenBound.
	OfBound float64 `json:"of_bound"`
	// DecodeShare is the share of wall time inside llama_decode; the rest
	// is Go-side overhead (tokenizing, scheduling, readout).
	DecodeShare float64 `json:"decode_share"`
	// PrefillTokensPerSec is evaluated tokens ÷ decode time (W0).
	PrefillTokensPerSec float64 `json:"prefill_tokens_per_s,omitempty"`
	// PrefillTokensPerSecMin and Max are the spread of W0 over rounds.
	PrefillTokensPerSecMin float64 `json:"prefill_tokens_per_s_min,omitempty"`
	PrefillTokensPerSecMax float64 `json:"prefill_tokens_per_s_max,omitempty"`
	PromptTokens           int     `json:"prompt_tokens,omitempty"`
	// AvgPrefix and AvgSuffix are the mean state-prefix and suffix lengths.
	AvgPrefix float64 `json:"avg_prefix_tokens,omitempty"`
	AvgSuffix float64 `json:"avg_suffix_tokens,omitempty"`
	// EscalationRate is the share of decisions the cascade (W4) sent on to
	// the big model.
	EscalationRate float64 `json:"escalation_rate,omitempty"`
}

// Report is the whole run.
type Report struct {
	Started time.Time `json:"started"`
	Rows    []Row     `json:"rows"`
	Notes   []string  `json:"notes,omitempty"`
}

// finish derives the ratio columns and appends one row per mode: the
// median round, with each mode's speed-up over fresh taken within a round.
// samples[0] is the fresh mode.
func finish(rep *Report, minimal int64, avgPrefix, avgSuffix float64, samples []sample) {
	fr := samples[0]
	bound := float64(fr[0].TokensSubmitted) / float64(minimal)
	for _, s := range samples {
		r := s.median()
		ratios := make([]float64, len(s))
		for k := range s {
			ratios[k] = s[k].DecisionsPerSec / fr[k].DecisionsPerSec
		}
		r.SpeedupVsFresh, r.SpeedupMin, r.SpeedupMax = Spread(ratios)
		r.MinimalTokens = minimal
		r.AvgPrefix, r.AvgSuffix = avgPrefix, avgSuffix
		r.TokenBound = bound
		r.OfBound = r.SpeedupVsFresh / bound
		rep.Rows = append(rep.Rows, r)
	}
}

// together compares a mode that submits work together with one that
// submits it alone: the median and spread of the same-round ratios of
// decisions/s, and whether together stays at or above alone within the
// spread (its best round reaches alone's).
func together(what string, alone, with sample) string {
	ratios := make([]float64, min(len(alone), len(with)))
	for k := range ratios {
		ratios[k] = with[k].DecisionsPerSec / alone[k].DecisionsPerSec
	}
	med, lo, hi := Spread(ratios)
	verdict := "not slower"
	if hi < 1 {
		verdict = "SLOWER in every round"
	}
	return fmt.Sprintf("%s: %.2fx [%.2f–%.2f] (%s)", what, med, lo, hi, verdict)
}

// sample is one mode's measurements, one per round.
type sample []Row

// runRounds measures every mode once per round, the modes interleaved
// within each round in Rotation's order, each after the machine is quiet
// (at most settle).
func runRounds(rounds int, settle time.Duration, modes []func() (Row, error)) ([]sample, error) {
	out := make([]sample, len(modes))
	for i := range out {
		out[i] = make(sample, rounds)
	}
	err := Interleave(context.Background(), rounds, len(modes), settle, nil, func(r, i int) error {
		row, err := modes[i]()
		out[i][r] = row
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// median returns the round with the median decisions/s (the lower one of
// an even count), with the spread of the rounds filled in.
func (s sample) median() Row {
	dps := make([]float64, len(s))
	for i, r := range s {
		dps[i] = r.DecisionsPerSec
	}
	med, lo, hi := Spread(dps)
	var out Row
	for _, r := range s {
		if r.DecisionsPerSec == med {
			out = r
			break
		}
	}
	out.Rounds, out.DecisionsPerSecMin, out.DecisionsPerSecMax = len(s), lo, hi
	if out.PrefillTokensPerSec > 0 {
		tps := make([]float64, len(s))
		for i, r := range s {
			tps[i] = r.PrefillTokensPerSec
		}
		out.PrefillTokensPerSec, out.PrefillTokensPerSecMin, out.PrefillTokensPerSecMax = Spread(tps)
	}
	return out
}

// Spread returns the median (the lower one of an even count), the
// minimum and the maximum of xs: how every benchmark of verdict reports
// repeated measurements.
func Spread(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2], s[0], s[len(s)-1]
}

// WriteTable prints the report as an aligned table: medians over the
// rounds with their [min–max].
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%-18s %-17s %-3s %4s %9s %18s %8s %8s %7s %8s %8s %7s %17s %6s %6s\n",
		"workload", "mode", "thr", "n", "pre+suf", "dec/s [min–max]", "p50 ms", "p95 ms", "p95/p50", "tok sub", "tok eval", "bound", "vs fresh [range]", "of bnd", "decode")
	for _, row := range r.Rows {
		dps := fmt.Sprintf("%.2f [%.2f–%.2f]", row.DecisionsPerSec, row.DecisionsPerSecMin, row.DecisionsPerSecMax)
		if row.PrefillTokensPerSec > 0 {
			fmt.Fprintf(w, "%-18s %-17s %-3d %4d %9s %18s %8.1f %8.1f %6.2fx %8d %8d %7s %17s %6s %5.1f%%  prefill %.0f tok/s [%.0f–%.0f], %d-token prompt (%s)\n",
				row.Workload, row.Mode, row.Threads, row.Decisions, "-", dps, row.P50Ms, row.P95Ms, tailRatio(row),
				row.TokensSubmitted, row.TokensEvaluated, "-", "-", "-", 100*row.DecodeShare,
				row.PrefillTokensPerSec, row.PrefillTokensPerSecMin, row.PrefillTokensPerSecMax, row.PromptTokens, row.Model)
			continue
		}
		vs := fmt.Sprintf("%.2fx [%.2f–%.2f]", row.SpeedupVsFresh, row.SpeedupMin, row.SpeedupMax)
		if row.MinimalTokens == 0 {
			// W4: no token bound; "vs fresh" is against the big model alone.
			what := row.Model
			if row.Mode == "cascade" {
				what += fmt.Sprintf(", %.0f%% escalated", 100*row.EscalationRate)
			}
			fmt.Fprintf(w, "%-18s %-17s %-3d %4d %9s %18s %8.1f %8.1f %6.2fx %8d %8d %7s %17s %6s %5.1f%%  %s\n",
				row.Workload, row.Mode, row.Threads, row.Decisions, "-", dps, row.P50Ms, row.P95Ms, tailRatio(row),
				row.TokensSubmitted, row.TokensEvaluated, "-", vs, "-", 100*row.DecodeShare, what)
			continue
		}
		fmt.Fprintf(w, "%-18s %-17s %-3d %4d %9s %18s %8.1f %8.1f %6.2fx %8d %8d %6.2fx %17s %5.0f%% %5.1f%%\n",
			row.Workload, row.Mode, row.Threads, row.Decisions, fmt.Sprintf("%.0f+%.0f", row.AvgPrefix, row.AvgSuffix), dps, row.P50Ms, row.P95Ms, tailRatio(row),
			row.TokensSubmitted, row.TokensEvaluated, row.TokenBound, vs, 100*row.OfBound, 100*row.DecodeShare)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if len(r.Rows) > 0 {
		fmt.Fprintf(w, "%d rounds, modes interleaved within each; dec/s = median [min–max]; vs fresh = median [min–max] of the same round's ratio\n", r.Rows[0].Rounds)
	}
	fmt.Fprintln(w, "p95/p50 = tail latency over the median (fairness: every W3 request is the same size); pre+suf = mean state-prefix + suffix tokens; bound = fresh tokens / minimal tokens; of bnd = vs fresh / bound; decode = share of wall inside llama_decode (the rest is Go-side overhead)")
}

// tailRatio is a row's TailRatio.
func tailRatio(r Row) float64 { return TailRatio(r.P50Ms, r.P95Ms) }

// TailRatio is p95 ÷ p50 latency (0 without latencies): the fairness
// column of every verdict benchmark table.
func TailRatio(p50, p95 float64) float64 {
	if p50 <= 0 {
		return 0
	}
	return p95 / p50
}

// FanOut calls fn(0..n-1) from clients goroutines taking indexes in order,
// and returns each call's latency.
func FanOut(n, clients int, fn func(i int) error) ([]time.Duration, error) {
	next := make(chan int)
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := time.Now()
				errs[i] = fn(i)
				lat[i] = time.Since(t)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return lat, errors.Join(errs...)
}
