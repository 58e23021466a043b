package eval

import (
	"sort"
)

// Options configure Evaluate.
type Options struct {
	// Bins is the number of equal-width ECE bins. Defaults to 10.
	Bins int
	// Thresholds for the coverage table. Defaults to DefaultThresholds.
	Thresholds []float64
}

// DefaultThresholds of the coverage-versus-accuracy table.
var DefaultThresholds = []float64{0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99}

// Report is everything `verdict eval` prints.
type Report struct {
	// Labeled examples (gold known), Valid of them with a distribution.
	Labeled int `json:"labeled"`
	Valid   int `json:"valid"`
	// Skipped decisions whose gold is unknown, Unmatched results without a
	// gold record.
	Skipped   int `json:"skipped_unknown_gold"`
	Unmatched int `json:"unmatched"`

	Accuracy         float64 `json:"accuracy"`
	BalancedAccuracy float64 `json:"balanced_accuracy"`
	ValidRate        float64 `json:"valid_rate"`
	LatencyP50       float64 `json:"latency_p50_ms"`
	LatencyP95       float64 `json:"latency_p95_ms"`
	ECE              float64 `json:"ece"`
	Bins             []Bin   `json:"ece_bins"`
	Brier            float64 `json:"brier"`
	NLL              float64 `json:"nll"`
	// PositionBias is the total variation between the argmax positions and
	// the gold positions; Positions the counts behind it.
	PositionBias float64           `json:"position_bias"`
	Positions    []Position        `json:"positions"`
	Coverage     []CoverageRow     `json:"coverage"`
	Breakdown    []BreakdownRow    `json:"breakdown"`
	Notes        map[string]string `json:"notes,omitempty"`
}

// BreakdownRow is the headline metrics of one family × type group.
type BreakdownRow struct {
	Family    string  `json:"family"`
	Type      string  `json:"type"`
	Labeled   int     `json:"labeled"`
	Accuracy  float64 `json:"accuracy"`
	ValidRate float64 `json:"valid_rate"`
	ECE       float64 `json:"ece"`
	NLL       float64 `json:"nll"`
}

// Evaluate computes the report of labeled examples.
func Evaluate(ex []Example, o Options) Report {
	if o.Bins < 1 {
		o.Bins = 10
	}
	if o.Thresholds == nil {
		o.Thresholds = DefaultThresholds
	}
	r := Report{Labeled: len(ex)}
	var lat []float64
	for i := range ex {
		if ex[i].Valid() {
			r.Valid++
		}
		if ex[i].LatencyMS > 0 {
			lat = append(lat, ex[i].LatencyMS)
		}
	}
	r.ValidRate = div(float64(r.Valid), r.Labeled)
	r.Accuracy = Accuracy(ex)
	r.BalancedAccuracy = BalancedAccuracy(ex)
	r.LatencyP50, r.LatencyP95 = Percentile(lat, 50), Percentile(lat, 95)
	r.ECE, r.Bins = ECE(ex, o.Bins)
	r.Brier, r.NLL = Brier(ex), NLL(ex)
	r.PositionBias, r.Positions = PositionBias(ex)
	r.Coverage = Coverage(ex, o.Thresholds)
	groups := map[[2]string][]Example{}
	for _, e := range ex {
		for _, k := range [][2]string{{e.Family, e.Type}, {e.Family, "*"}, {"*", e.Type}} {
			groups[k] = append(groups[k], e)
		}
	}
	for k, g := range groups {
		ece, _ := ECE(g, o.Bins)
		valid := 0
		for i := range g {
			if g[i].Valid() {
				valid++
			}
		}
		r.Breakdown = append(r.Breakdown, BreakdownRow{Family: k[0], Type: k[1], Labeled: len(g), Accuracy: Accuracy(g), ValidRate: div(float64(valid), len(g)), ECE: ece, NLL: NLL(g)})
	}
	sort.Slice(r.Breakdown, func(i, j int) bool {
		a, b := r.Breakdown[i], r.Breakdown[j]
		if (a.Family == "*") != (b.Family == "*") {
			return b.Family == "*"
		}
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		if (a.Type == "*") != (b.Type == "*") {
			return b.Type == "*"
		}
		return a.Type < b.Type
	})
	return r
}
