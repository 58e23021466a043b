// Package engine defines what a scorer is and the parts of scoring that do
// not depend on a particular model runtime: prompt rendering and its
// versioning, answer-slot labels, and the readout math that turns option
// logits into probabilities and a result.
//
// A Scorer takes decisions and returns one decision.Result per decision, in
// order. Runtimes live in subpackages: engine/llamacpp embeds llama.cpp
// (built with the "llamacpp" tag), engine/sagemaker calls a remote endpoint.
//
// Data flows one way: a decision is rendered to a Prompt (state first, so
// that the state prefix can be shared), the runtime tokenizes and decodes
// it, reads one logit per option slot, and Readout turns those logits into
// the result's probabilities, chosen option, confidence and margin.
package engine
