// Package eval measures scored decisions against gold labels: accuracy,
// balanced accuracy, valid rate, latency percentiles, expected calibration
// error over equal-width bins, Brier score, negative log-likelihood,
// position bias and a coverage-versus-accuracy table, broken down by family
// and question type, as text, JSON or a reliability diagram (SVG).
//
// ReadGold and ReadFamilies read the JevBench-240 layout (gold.jsonl and
// the domains of cases.jsonl); Join matches `verdict batch` records with
// the gold labels; Evaluate computes the Report. PairUp and Cascade replay
// a small model and a big one over the same labeled decisions to choose a
// cascade's escalation threshold (CascadeReport).
package eval
