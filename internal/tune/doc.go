// Package tune owns what happens to option logits between the engine and
// the policy: the temperature, calibration and option-order debiasing.
//
// Temperature has one owner and one precedence, applied by Resolve and
// nowhere else:
//
//  1. a calibration file (verdict calibrate), when one is configured: it was
//     fitted for this model and prompt, so it wins;
//  2. the policy kind's own temperature, when the kind sets one;
//  3. --temperature, when given;
//  4. the policy file's top-level temperature (the default of kinds that
//     set none), when it sets one: a default never replaces a flag;
//  5. 1.
//
// Every result says which one applied (temperature_source), whether it was
// calibrated and the calibration file's sha256.
//
// Debiasing scores a decision under K cyclic rotations of its options in
// one engine call (the engine prefills the shared state once and decodes K
// question suffixes), maps each rotation's log-softmax back to the original
// options and averages it: the combined option_logits are mean
// log-probabilities, on which the temperature is then applied. K comes from
// the request's "debias", else the policy kind's, else --debias; it is
// capped at the number of options, and K < 2 is off.
//
// Scorer wraps any engine.Scorer with both; score, batch, eval, serve,
// worker and up all score through it.
package tune
