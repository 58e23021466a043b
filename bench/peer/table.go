package peer

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/verdict-dev/verdict/bench"
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

// BoundPerSec is the decisions/s of an engine that evaluates exactly the
// minimal tokens at the peak prefill rate.
func (r *Report) BoundPerSec() float64 {
	if r.MinimalTokens == 0 || r.PeakPrefill == 0 {
		return 0
	}
	return float64(r.Decisions) / (float64(r.MinimalTokens) / r.PeakPrefill)
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

// WriteTable prints one row per mode and the ratios the comparison is for.
func (r *Report) WriteTable(w io.Writer) {
	bound := r.BoundPerSec()
	fmt.Fprintf(w, "%d states, %d decisions; minimal tokens %d; peak prefill %.0f tok/s; token bound %.2f decisions/s\n",
		r.States, r.Decisions, r.MinimalTokens, r.PeakPrefill, bound)
	fmt.Fprintf(w, "%-52s %7s %22s %10s %10s %12s %8s\n", "mode", "clients", "dec/s [min–max]", "p50 ms", "p95 ms", "tok eval", "of bound")
	for _, m := range r.Modes {
		med, lo, hi := bench.Spread(m.DecisionsPerSec)
		toks := make([]float64, len(m.TokensEvaluated))
		for i, t := range m.TokensEvaluated {
			toks[i] = float64(t)
		}
		tmed, _, _ := bench.Spread(toks)
		of := "-"
		if bound > 0 {
			of = fmt.Sprintf("%.0f%%", 100*med/bound)
		}
		fmt.Fprintf(w, "%-52s %7d %22s %10.1f %10.1f %12.0f %8s\n", m.Name, m.Clients,
			fmt.Sprintf("%.2f [%.2f–%.2f]", med, lo, hi), percentile(m.LatencyMs, 50), percentile(m.LatencyMs, 95), tmed, of)
	}
	med, lo, hi := r.Ratio(isVerdict, func(m Mode) bool { return !isVerdict(m) })
	fmt.Fprintf(w, "verdict's best / llama-server's best: %.2fx [%.2f–%.2f]\n", med, lo, hi)
	sameClients := func(verdict bool) func(Mode) bool {
		return func(m Mode) bool { return isVerdict(m) == verdict && m.Clients > 1 }
	}
	med, lo, hi = r.Ratio(sameClients(true), sameClients(false))
	fmt.Fprintf(w, "verdict / llama-server with N slots, N clients each: %.2fx [%.2f–%.2f]\n", med, lo, hi)
	rounds := 0
	if len(r.Modes) > 0 {
		rounds = len(r.Modes[0].DecisionsPerSec)
	}
	fmt.Fprintf(w, "%d rounds, modes interleaved within each; ratios are medians of same-round ratios [min–max]\n", rounds)
}
