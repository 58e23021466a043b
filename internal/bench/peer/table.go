package peer

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/verdict-dev/verdict/internal/bench"
)

// percentile is the p-th percentile (nearest rank) of xs.
func percentile(xs []float64, p int) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

// isVerdict tells verdict's modes from the peer's.
func isVerdict(m Mode) bool { return strings.HasPrefix(m.Name, "verdict") }

// boundAt is the decisions/s of an engine that evaluates exactly tokens
// for decisions at rate tokens/s.
func boundAt(decisions int, tokens int64, rate float64) float64 {
	if tokens == 0 || rate == 0 {
		return 0
	}
	return float64(decisions) / (float64(tokens) / rate)
}

// boundRate is the token bound's rate: the median of the rounds' fresh
// prefill rates, or PeakPrefill for a report without them.
func (r *Report) boundRate() float64 {
	if len(r.PrefillRounds) == 0 {
		return r.PeakPrefill
	}
	med, _, _ := bench.Spread(r.PrefillRounds)
	return med
}

// BoundPerSec is the decisions/s of an engine that evaluates exactly the
// minimal tokens at the median round's fresh prefill rate.
func (r *Report) BoundPerSec() float64 {
	return boundAt(r.Decisions, r.MinimalTokens, r.boundRate())
}

// IndependentBoundPerSec is the token bound of the independent workload.
func (r *Report) IndependentBoundPerSec() float64 {
	return boundAt(r.Independent, r.IndependentTokens, r.boundRate())
}

// Share is m's fraction of its workload's token bound, round by round
// against the same round's prefill rate (median, min, max over rounds);
// a report without per-round rates uses PeakPrefill for every round.
// Strict is the median round's fraction of the bound at PeakPrefill, the
// fastest round's rate.
func (r *Report) Share(m Mode) (med, lo, hi, strict float64) {
	decisions, tokens := r.Decisions, r.MinimalTokens
	if m.Workload == "independent" {
		decisions, tokens = r.Independent, r.IndependentTokens
	}
	var shares []float64
	for k, d := range m.DecisionsPerSec {
		rate := r.PeakPrefill
		if k < len(r.PrefillRounds) {
			rate = r.PrefillRounds[k]
		}
		if b := boundAt(decisions, tokens, rate); b > 0 {
			shares = append(shares, d/b)
		}
	}
	if len(shares) == 0 {
		return 0, 0, 0, 0
	}
	med, lo, hi = bench.Spread(shares)
	dmed, _, _ := bench.Spread(m.DecisionsPerSec)
	if b := boundAt(decisions, tokens, r.PeakPrefill); b > 0 {
		strict = dmed / b
	}
	return med, lo, hi, strict
}

// Ratio is, per round, the best of the modes picked by num over the best
// of those picked by den; it returns median, min and max over rounds.
func (r *Report) Ratio(num, den func(Mode) bool) (med, lo, hi float64) {
	rounds := 0
	for _, m := range r.Modes {
		rounds = max(rounds, len(m.DecisionsPerSec))
	}
	var ratios []float64
	for k := 0; k < rounds; k++ {
		best := func(pick func(Mode) bool) float64 {
			b := 0.0
			for _, m := range r.Modes {
				if pick(m) && k < len(m.DecisionsPerSec) {
					b = max(b, m.DecisionsPerSec[k])
				}
			}
			return b
		}
		if d := best(den); d > 0 {
			ratios = append(ratios, best(num)/d)
		}
	}
	return bench.Spread(ratios)
}

// of picks the modes of one workload, verdict's or the peer's.
func of(workload string, verdict bool) func(Mode) bool {
	return func(m Mode) bool { return m.Workload == workload && isVerdict(m) == verdict }
}

// WriteTable prints one row per mode and the ratios the comparison is for.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "fresh prefill per round, the faster system's: %s tok/s (llama-server %s, verdict %s); fastest round %.0f\n",
		spreadText(r.PrefillRounds), spreadText(r.PrefillPeer), spreadText(r.PrefillVerdict), r.PeakPrefill)
	fmt.Fprintf(w, "shared: %d states, %d decisions; minimal tokens %d; token bound %.2f decisions/s (median round)\n",
		r.States, r.Decisions, r.MinimalTokens, r.BoundPerSec())
	fmt.Fprintf(w, "independent: %d decisions (each state's first question); minimal tokens %d; token bound %.2f decisions/s\n",
		r.Independent, r.IndependentTokens, r.IndependentBoundPerSec())
	fmt.Fprintf(w, "%-12s %-52s %7s %22s %10s %10s %8s %10s %16s %8s\n", "workload", "mode", "clients", "dec/s [min–max]", "p50 ms", "p95 ms", "p95/p50", "tok eval", "of bound", "of peak")
	for _, m := range r.Modes {
		med, lo, hi := bench.Spread(m.DecisionsPerSec)
		toks := make([]float64, len(m.TokensEvaluated))
		for i, t := range m.TokensEvaluated {
			toks[i] = float64(t)
		}
		tmed, _, _ := bench.Spread(toks)
		ofb, ofp := "-", "-"
		if smed, slo, shi, strict := r.Share(m); smed > 0 {
			ofb = fmt.Sprintf("%.0f%% [%.0f–%.0f]", 100*smed, 100*slo, 100*shi)
			ofp = fmt.Sprintf("%.0f%%", 100*strict)
		}
		p50, p95 := percentile(m.LatencyMs, 50), percentile(m.LatencyMs, 95)
		fmt.Fprintf(w, "%-12s %-52s %7d %22s %10.1f %10.1f %7.2fx %10.0f %16s %8s\n", m.Workload, m.Name, m.Clients,
			fmt.Sprintf("%.2f [%.2f–%.2f]", med, lo, hi), p50, p95, bench.TailRatio(p50, p95), tmed, ofb, ofp)
	}
	med, lo, hi := r.Ratio(of("shared", true), of("shared", false))
	fmt.Fprintf(w, "shared: verdict's best / llama-server's best: %.2fx [%.2f–%.2f]\n", med, lo, hi)
	if med, lo, hi = r.Ratio(of("shared", true), func(m Mode) bool { return of("shared", false)(m) && m.Clients > 1 }); med > 0 {
		fmt.Fprintf(w, "shared: verdict's best / llama-server with N slots under N clients: %.2fx [%.2f–%.2f]\n", med, lo, hi)
	} else {
		fmt.Fprintln(w, "shared: verdict's best / llama-server with N slots under N clients: - (no mode with more than one client: --peer-slots 1)")
	}
	med, lo, hi = r.Ratio(of("independent", true), of("independent", false))
	fmt.Fprintf(w, "independent: verdict / llama-server's best: %.2fx [%.2f–%.2f]\n", med, lo, hi)
	rounds := 0
	if len(r.Modes) > 0 {
		rounds = len(r.Modes[0].DecisionsPerSec)
	}
	fmt.Fprintf(w, "%d rounds, modes interleaved within each; ratios are medians of same-round ratios [min–max]\n", rounds)
}

// spreadText prints xs as "median [min–max]", or "-" when empty.
func spreadText(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	med, lo, hi := bench.Spread(xs)
	return fmt.Sprintf("%.0f [%.0f–%.0f]", med, lo, hi)
}
