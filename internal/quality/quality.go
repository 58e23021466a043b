package quality

import (
	"path/filepath"
	"slices"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/eval"
	"github.com/verdict-dev/verdict/internal/results"
)

// DefaultBins is the number of equal-width ECE bins, as `verdict eval`'s
// default.
const DefaultBins = 10

// NoName stands for a kind or a model a result does not name.
const NoName = "-"

// Key is a group of labeled decisions: one policy kind and one model.
type Key struct {
	Kind  string `json:"kind"`
	Model string `json:"model"`
}

// KeyOf names the group of a result: its kind (as eval.Join's family
// for a result without a cases file) and ModelOf.
func KeyOf(r *decision.Result) Key {
	k := Key{Kind: r.Kind, Model: ModelOf(r)}
	if k.Kind == "" {
		k.Kind = NoName
	}
	return k
}

// ModelOf names the model that answered: the GGUF's name, else its
// file's base name, else NoName.
func ModelOf(r *decision.Result) string {
	switch m := r.Model; {
	case m == nil:
		return NoName
	case m.Name != "":
		return m.Name
	case m.File != "":
		return filepath.Base(m.File)
	}
	return NoName
}

// ExampleOf is a labeled decision as package eval measures it, the same
// example eval.Join makes of the exported records: ok is false when the
// label is not one of the decision's options (the feedback call refuses
// those) or is eval.Unknown (which eval skips).
func ExampleOf(stored results.Stored, label results.Feedback) (e eval.Example, ok bool) {
	r := &stored.Record.Result
	gold := slices.Index(r.OptionIDs, label.Option)
	if gold < 0 || label.Option == eval.Unknown {
		return eval.Example{}, false
	}
	e = eval.Example{Family: KeyOf(r).Kind, Type: "decision", Options: r.OptionIDs, Gold: gold}
	if r.Error == nil && len(r.Probabilities) == len(r.OptionIDs) {
		e.Probs = r.Probabilities
	}
	if r.Timing != nil {
		e.LatencyMS = r.Timing.Total
	}
	return e, true
}

// Agrees reports whether the model's top option is the label; an answer
// without a distribution (an error result) does not agree, as
// eval.Accuracy counts it.
func Agrees(e *eval.Example) bool { return e.Valid() && eval.Argmax(e.Probs) == e.Gold }

// Stats are the figures of a set of labeled decisions.
type Stats struct {
	// Labels is the number of labeled decisions, Valid of them with a
	// distribution, Agreed of them whose top option is the label.
	Labels int `json:"labels"`
	Valid  int `json:"valid"`
	Agreed int `json:"agreed"`
	// Agreement is eval.Accuracy: Agreed / Labels.
	Agreement float64 `json:"agreement"`
	// Brier is eval.Brier and ECE eval.ECE, over the valid ones.
	Brier float64 `json:"brier"`
	ECE   float64 `json:"ece"`
}

// Measure computes the figures of ex with eval's functions over bins
// equal-width ECE bins (DefaultBins when bins < 1).
func Measure(ex []eval.Example, bins int) Stats {
	if bins < 1 {
		bins = DefaultBins
	}
	s := Stats{Labels: len(ex)}
	for i := range ex {
		if ex[i].Valid() {
			s.Valid++
		}
		if Agrees(&ex[i]) {
			s.Agreed++
		}
	}
	s.Agreement = eval.Accuracy(ex)
	s.Brier = eval.Brier(ex)
	s.ECE, _ = eval.ECE(ex, bins)
	return s
}
