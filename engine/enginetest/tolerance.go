package enginetest

import "github.com/verdict-dev/verdict/engine/llamacpp"

// flashDefault: engines started with default options use flash attention
// (the upstream route on the CPU, and every GPU).
var flashDefault = llamacpp.Options{}.WithDefaults().FlashAttention == "on"

// ProbTol is tol, a bound on how far the same decision's probabilities
// may move between two paths through the engine (alone or batched, cached
// or not), widened to 1e-3 when the default engine uses flash attention:
// ggml's CPU flash attention rounds Q to F16 and accumulates in F16, which
// moves probabilities by up to ~1.2e-4 on the tiny model (the plain path:
// ~1e-7). See the engine's logitTol and probTol.
func ProbTol(tol float64) float64 {
	if flashDefault {
		return max(tol, 1e-3)
	}
	return tol
}

// LogitTol is ProbTol for option logits: under flash attention at least
// 1e-2 (measured up to ~4e-3).
func LogitTol(tol float64) float64 {
	if flashDefault {
		return max(tol, 1e-2)
	}
	return tol
}
