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

// IndependentBoundPerSec is the token bound of the independent workload.
func (r *Report) IndependentBoundPerSec() float64 {
	if r.IndependentTokens == 0 || r.PeakPrefill == 0 {
		return 0
	}
	return float64(r.Independent) / (float64(r.IndependentTokens) / r.PeakPrefill)
}

// of picks the modes of one workload, verdict's or the peer's.
func of(workload string, verdict bool) func(Mode) bool {
	return func(m Mode) bool { return m.Workload == workload && isVerdict(m) == verdict }
}

// WriteTable prints one row per mode and the ratios the comparison is for.
func (r *Report) WriteTable(w io.Writer) {
	bound := r.BoundPerSec()
	fmt.Fprintf(w, "shared: %d states, %d decisions; minimal tokens %d; peak prefill %.0f tok/s (llama-server %.0f, verdict %.0f); token bound %.2f decisions/s\n",
		r.States, r.Decisions, r.MinimalTokens, r.PeakPrefill, r.PeakPrefillPeer, r.PeakPrefillVerdict, bound)
	ibound := r.IndependentBoundPerSec()
	fmt.Fprintf(w, "independent: %d decisions (each state's first question); minimal tokens %d; token bound %.2f decisions/s\n",
		r.Independent, r.IndependentTokens, ibound)
	fmt.Fprintf(w, "%-12s %-52s %7s %22s %10s %10s %8s %10s %8s\n", "workload", "mode", "clients", "dec/s [min–max]", "p50 ms", "p95 ms", "p95/p50", "tok eval", "of bound")
	for _, m := range r.Modes {
		med, lo, hi := bench.Spread(m.DecisionsPerSec)
		toks := make([]float64, len(m.TokensEvaluated))
		for i, t := range m.TokensEvaluated {
			toks[i] = float64(t)
		}
		tmed, _, _ := bench.Spread(toks)
		b := bound
		if m.Workload == "independent" {
			b = ibound
		}
		ofb := "-"
		if b > 0 {
			ofb = fmt.Sprintf("%.0f%%", 100*med/b)
		}
		p50, p95 := percentile(m.LatencyMs, 50), percentile(m.LatencyMs, 95)
		fmt.Fprintf(w, "%-12s %-52s %7d %22s %10.1f %10.1f %7.2fx %10.0f %8s\n", m.Workload, m.Name, m.Clients,
			fmt.Sprintf("%.2f [%.2f–%.2f]", med, lo, hi), p50, p95, bench.TailRatio(p50, p95), tmed, ofb)
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
