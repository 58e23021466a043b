package llamacpp

// Drift is how far the same decision's scores may move between two paths
// through one engine (alone or batched, from a cached prefix or not) on
// top of the plain attention path's rounding (docs/scoring.md, measured
// invariance).
type Drift struct {
	Logits        float64 // option logits, single-token labels
	Probabilities float64 // option probabilities
	LabelSums     float64 // summed log-probabilities of many multi-token labels
}

// DriftOf is the drift of engines with these options. ggml's CPU flash
// attention rounds Q to F16 and accumulates in F16, so with it on the
// bounds allow for that rounding, with room to spare (the measurements
// are in docs/scoring.md, measured invariance); the plain path adds
// nothing.
func DriftOf(o Options) Drift {
	if o.withDefaults().FlashAttention != "on" {
		return Drift{}
	}
	return Drift{Logits: 1e-2, Probabilities: 1e-3, LabelSums: 8e-2}
}
