package quality

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/eval"
)

// Reference is a figure the windows are compared with.
type Reference struct {
	Value float64 `json:"value"`
	// From says where Value comes from; "" means there is no reference,
	// and the figure is not compared.
	From string `json:"from,omitempty"`
}

// Baseline is what a group's windows are compared with.
type Baseline struct {
	Agreement Reference `json:"agreement"`
	ECE       Reference `json:"ece"`
}

// Finding is a window's figure that differs from its reference by more
// than the margin.
type Finding struct {
	// Metric is "agreement" or "ece".
	Metric    string  `json:"metric"`
	Value     float64 `json:"value"`
	Reference float64 `json:"reference"`
	// Delta is Value − Reference.
	Delta float64 `json:"delta"`
	From  string  `json:"from"`
}

// Drift compares s with b: a Finding for each figure with a reference
// that differs from it by more than margin.
func Drift(b Baseline, s Stats, margin float64) []Finding {
	var out []Finding
	for _, c := range []struct {
		metric string
		ref    Reference
		value  float64
	}{{"agreement", b.Agreement, s.Agreement}, {"ece", b.ECE, s.ECE}} {
		if c.ref.From == "" {
			continue
		}
		if d := c.value - c.ref.Value; math.Abs(d) > margin {
			out = append(out, Finding{Metric: c.metric, Value: c.value, Reference: c.ref.Value, Delta: d, From: c.ref.From})
		}
	}
	return out
}

// Pin is what a calibration file says about the figures to expect.
type Pin struct {
	// Name names the file in the report.
	Name string `json:"name"`
	// ModelSHA256 and PromptVersion pin it: only a group whose results
	// are all of that model and prompt is compared with it.
	ModelSHA256   string `json:"model_sha256"`
	PromptVersion string `json:"prompt_version"`
	// SHA256 is the file's sha256, which the results scored with it
	// carry (calibration_sha256).
	SHA256 string `json:"sha256"`
	// ECE is the fit's out-of-fold ECE after calibrating
	// (cross_validation.ece_after).
	ECE float64 `json:"ece"`
}

// AssessConfig configures Assess.
type AssessConfig struct {
	// Size is the number of labels of a window. Defaults to DefaultSize.
	Size int
	// Bins is the number of ECE bins. Defaults to DefaultBins.
	Bins int
	// Margin is the largest difference from a reference that is not
	// drift.
	Margin float64
	// Calibration, when set, is the ECE reference of the groups it is
	// pinned to; other figures are compared with the first full window.
	Calibration *Pin
}

// Span is one window of a group's labels.
type Span struct {
	// First and Last are the 1-based positions of its labels in the
	// group's, oldest first.
	First int `json:"first"`
	Last  int `json:"last"`
	Stats
	Drift []Finding `json:"drift,omitempty"`
}

// Assessed is one kind and model's figures over a range of labels.
type Assessed struct {
	Key
	// All are the figures over every label of the range.
	All Stats `json:"all"`
	// Windows cut the labels into windows of Size ending with the latest
	// (the oldest may hold fewer): the last is what Window's gauges show
	// for the same labels.
	Windows  []Span   `json:"windows"`
	Baseline Baseline `json:"baseline"`
	// Pinned counts the results of the calibration's model and prompt,
	// Calibrated those scored with the calibration file itself.
	Pinned     int `json:"pinned,omitempty"`
	Calibrated int `json:"calibrated,omitempty"`
	// Note says why the calibration is not the ECE reference, when it
	// is given but not used.
	Note string `json:"note,omitempty"`
	// Drift is true when a window has a Finding.
	Drift bool `json:"drift"`
}

// Assess groups labeled examples (in label order) and their results by
// kind and model, measures each group over the whole range and over its
// windows, and compares every full window (or the only one) with the
// group's baseline: the calibration's ECE where it applies, else the
// first full window's figures (none when no window is full).
func Assess(ex []eval.Example, rs []decision.Result, cfg AssessConfig) []Assessed {
	if cfg.Size < 1 {
		cfg.Size = DefaultSize
	}
	type members struct {
		ex []eval.Example
		rs []*decision.Result
	}
	by := map[Key]*members{}
	for i := range ex {
		k := KeyOf(&rs[i])
		m := by[k]
		if m == nil {
			m = &members{}
			by[k] = m
		}
		m.ex = append(m.ex, ex[i])
		m.rs = append(m.rs, &rs[i])
	}
	out := make([]Assessed, 0, len(by))
	for k, m := range by {
		out = append(out, assessGroup(k, m.ex, m.rs, cfg))
	}
	slices.SortFunc(out, func(a, b Assessed) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Model, b.Model))
	})
	return out
}

func assessGroup(k Key, ex []eval.Example, rs []*decision.Result, cfg AssessConfig) Assessed {
	a := Assessed{Key: k, All: Measure(ex, cfg.Bins)}
	n := len(ex)
	rem := n % cfg.Size
	if rem > 0 { // the oldest window holds fewer than Size
		a.Windows = append(a.Windows, Span{First: 1, Last: rem, Stats: Measure(ex[:rem], cfg.Bins)})
	}
	for lo := rem; lo < n; lo += cfg.Size {
		a.Windows = append(a.Windows, Span{First: lo + 1, Last: lo + cfg.Size, Stats: Measure(ex[lo:lo+cfg.Size], cfg.Bins)})
	}
	for _, w := range a.Windows {
		if w.Labels == cfg.Size {
			from := fmt.Sprintf("the first full window (labels %d-%d)", w.First, w.Last)
			a.Baseline = Baseline{Agreement: Reference{Value: w.Agreement, From: from}, ECE: Reference{Value: w.ECE, From: from}}
			break
		}
	}
	if p := cfg.Calibration; p != nil {
		for _, r := range rs {
			if r.Model != nil && r.Model.SHA256 == p.ModelSHA256 && r.PromptVersion == p.PromptVersion {
				a.Pinned++
			}
			if r.CalibrationSHA256 == p.SHA256 {
				a.Calibrated++
			}
		}
		if a.Pinned == len(rs) {
			a.Baseline.ECE = Reference{Value: p.ECE, From: p.Name + " (cross_validation.ece_after)"}
		} else {
			a.Note = fmt.Sprintf("%s is pinned to model %s and prompt %s; %d of %d results are: ECE is compared with the first full window",
				p.Name, short(p.ModelSHA256), p.PromptVersion, a.Pinned, len(rs))
		}
	}
	for i := range a.Windows {
		if a.Windows[i].Labels < cfg.Size && len(a.Windows) > 1 {
			continue // the oldest holds too few labels to judge; alone, it is the live window
		}
		a.Windows[i].Drift = Drift(a.Baseline, a.Windows[i].Stats, cfg.Margin)
		a.Drift = a.Drift || len(a.Windows[i].Drift) > 0
	}
	return a
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
