// Package batch scores JSONL files offline. LineReader reads lines with a
// length bound and reports an over-long line instead of stopping there;
// ParseLine accepts either wire format per line; Run holds a bounded window
// of decisions, groups them by state so each state is prefilled once,
// scores them in chunks and writes one Record per input line in input
// order; Resume makes an interrupted output file (even after SIGKILL) safe
// to append to. Progress is reported as a terminal bar (Bar) or periodic
// plain lines (Plain).
package batch
