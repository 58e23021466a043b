package enginetest

import "github.com/verdict-dev/verdict/engine/llamacpp"

// drift is that of engines started with default options (flash attention
// on, the default): see llamacpp.DriftOf.
var drift = llamacpp.DriftOf(llamacpp.Options{})

// ProbTol is tol, a bound on how far the same decision's probabilities
// may move between two paths through the engine on the plain attention
// path, widened by the default engine's drift.
func ProbTol(tol float64) float64 { return max(tol, drift.Probabilities) }

// LogitTol is ProbTol for option logits.
func LogitTol(tol float64) float64 { return max(tol, drift.Logits) }
