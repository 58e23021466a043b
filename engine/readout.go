package engine

import (
	"math"

	"github.com/verdict-dev/verdict/decision"
)

// Softmax returns exp(x_i/T) / Σ exp(x_j/T), computed stably in float64.
// A temperature <= 0 is treated as 1.
func Softmax(logits []float64, temperature float64) []float64 {
	if temperature <= 0 {
		temperature = 1
	}
	maxv := math.Inf(-1)
	for _, x := range logits {
		maxv = math.Max(maxv, x/temperature)
	}
	out := make([]float64, len(logits))
	sum := 0.0
	for i, x := range logits {
		out[i] = math.Exp(x/temperature - maxv)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// Readout fills the scoring fields of r from the option logits: option ids,
// logits, probabilities, chosen (the first of the highest), confidence and
// margin over the runner-up.
func Readout(r *decision.Result, d *decision.Decision, logits []float64, temperature float64) {
	if temperature <= 0 {
		temperature = 1
	}
	r.ID, r.Kind = d.ID, d.Kind
	r.OptionIDs = d.OptionIDs()
	r.OptionLogits = logits
	r.Temperature = temperature
	r.Probabilities = Softmax(logits, temperature)
	best, second := -1, -1
	for i, p := range r.Probabilities {
		switch {
		case best < 0 || p > r.Probabilities[best]:
			best, second = i, best
		case second < 0 || p > r.Probabilities[second]:
			second = i
		}
	}
	r.Chosen = d.Options[best].ID
	r.Confidence = decision.Confidence(r.Probabilities)
	r.Margin = r.Probabilities[best]
	if second >= 0 {
		r.Margin -= r.Probabilities[second]
	}
}
