// Package decision holds verdict's wire formats and its internal decision,
// result and outcome types.
//
// A Decision is one question about one piece of state with an ordered list
// of allowed options. Requests enter in one of two public shapes, both
// parsed here and mapped onto []Decision:
//
//   - the SemIf shape: one decision, bare or under "decision", or a batch
//     under "decisions" (ParseSemIf);
//   - the System One shape: one state and a map of typed questions
//     (ParseSystemOne, SystemOneRequest.Decisions).
//
// Parsing never panics and never guesses: every problem is reported as a
// FieldError carrying the JSON path of the offending field, and all problems
// of a request are reported together in a *ValidationError. The sentinel
// errors ErrMalformed, ErrInvalid and ErrTooLarge tell the three classes
// apart (HTTP 400, 422 and 413).
//
// The package is a leaf: it imports only the standard library, so every
// other package of verdict may depend on it.
package decision
