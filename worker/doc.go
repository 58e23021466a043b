// Package worker consumes decisions from a queue, scores them, applies the
// policy and publishes the results.
//
// # Words
//
// A receive is the messages one Receive call returned; a job is one of
// those messages being processed; a batch is the jobs processed together
// within one message deadline. To act on a message is to delete it or to
// release it (set its visibility to a delay, 0 for at once); to extend it
// is to push its visibility back while it is processed (the heartbeat).
//
// # Receive loop (worker.go)
//
// Run runs one receive loop. Before each receive it takes a slot from the
// flow control, then hands the messages received to a goroutine of their
// own (processReceived), which holds the slot until every message is acted
// on:
//
//	receive (long poll, up to Config.MaxMessages)
//	  → decode each message's envelope (invalid: error results, then delete)
//	  → policy: rules and refusals settle decisions without the model
//	  → group the remaining decisions by state across the batch and score
//	    each group with one Scorer call (the state is prefilled once)
//	  → policy: thresholds and fallbacks settle the rest
//	  → publish one record per decision to every sink
//	  → act on each message: delete, or release with a delay
//
// A message whose receive count says it was held before (a crashed
// worker, an expired visibility) is processed first and alone, as a batch
// of its own; the others of its receive form one batch after it. If a
// merged Scorer call fails for a reason other than load, shutdown or the
// deadline, each message's decisions are scored again on their own
// (score.go), so that one poison message does not take its neighbours to
// the dead-letter queue.
//
// Every batch has a deadline (Config.MessageTimeout, derived from the
// visibility timeout): past it, the scorer and sink calls still running
// are abandoned, even those that ignore cancellation (await), and the
// messages are released with the retry delay.
//
// # Flow control (flow.go)
//
// The worker processes at most Config.Concurrency receives at once and
// asks each receive for no more messages than its measured processing
// time says will finish within half the visibility timeout. A fresh
// worker, and one that has just received a message delivered before, is
// cautious: one receive at a time, one message each, until a receive of
// fresh messages has been timed. A message that crashes the process thus
// takes few neighbours with it.
//
// # Heartbeats (heartbeat.go)
//
// While a receive is processed, its messages not yet acted on are extended
// to Config.Visibility every Config.Heartbeat (a third of the visibility
// timeout by default), so that a slow decision is not delivered to
// another worker. A lock shared by the receive's jobs keeps an extension
// from interleaving with an action.
//
// # Outcome → queue action (outcome.go, ack.go)
//
// A job's outcome is an error value (nil for success), and one function,
// decide, maps it to the queue action; act applies the actions:
//
//   - success (records published): delete;
//   - invalid message: delete (its error results were published first);
//   - retryable engine error (busy, unavailable, timeout), transient
//     publish failure, the batch deadline, a recovered panic, any other
//     failure: release with RetryBase·2^(receives−1), at most RetryMax, so
//     that a message that keeps failing reaches the dead-letter queue by
//     the redrive policy;
//   - a stopping worker, or a closed engine: release with visibility 0.
//
// Nothing is deleted before its records are published. Publishing is
// idempotent by request id + decision id (see package sink), so a message
// released or redelivered after a crash publishes the same records again;
// a bounded memory (memo.go) keeps this worker from sending a sink the
// records it already accepted when only another sink failed.
//
// # Stop sequence (stop.go)
//
// Every stop begins in one method, beginStop, with a reason: a requested
// stop (Stop, which Run also calls with Config.ShutdownTimeout when its
// context is cancelled; a second signal calls Stop with a context already
// done), or a failure of the worker's own (its queue closed or gone, its
// engine closed: every message would fail alike). Then:
//
//  1. Receiving ends. The receives in flight drain: they finish as usual,
//     deleting what was published and releasing what failed.
//  2. Shortly before Stop's deadline (a fifth of the time left, at most
//     2 s, is kept for it), or at once when Stop's context is already
//     done, the work still running is abandoned: every batch's context
//     ends, calls that do not return are left behind, and every
//     unfinished message is released with visibility 0. Stop waits for
//     those releases until its deadline; a message whose release did not
//     finish in time comes back when its visibility ends.
//  3. When no receive is left, Closed is closed and Run returns: nil after
//     a requested stop, the failure after a stop of the worker's own.
//
// # Metrics and logs
//
// Metrics are registered on Config.Registry (or a registry of the worker's
// own) and served by Handler. Logs never contain state text unless
// Config.LogState is set.
package worker
