// Package worker consumes decisions from a queue, scores them, applies the
// policy and publishes the results.
//
// One Worker runs this loop:
//
//	receive (long poll, up to 10 messages)
//	  → decode each message's envelope (invalid: error results, then delete)
//	  → policy.Before per decision (rules and refusals settle without the model)
//	  → group the remaining decisions by state across all received messages
//	    and score each group with one Scorer call (the state is prefilled once)
//	  → policy.After per decision
//	  → publish one record per decision to every sink
//	  → act on the message: delete, or release with a delay
//
// While a batch is being processed, a heartbeat extends the visibility of
// its messages every third of the visibility timeout, so a slow decision is
// not delivered to another worker. What happens to a message is decided in
// one function (decide) from the error value its processing ended with:
// success deletes; an invalid message deletes (after its error results are
// published); a retryable engine error (busy, unavailable, timeout) or a
// failed publish releases with an exponential delay by receive count; any
// other failure, including a recovered panic, releases likewise so that a
// message that keeps failing reaches the dead-letter queue by the redrive
// policy; a stopping worker releases at once.
//
// Every received message has a deadline (Config.MessageTimeout, derived
// from the visibility timeout): past it, the scorer and sink calls still
// running are abandoned, even those that ignore cancellation, and the
// message is released. A message whose receive count says it was held
// before (a crashed worker, an expired visibility) is processed first and
// alone; a fresh worker, and one that has just received such a message,
// takes one message and runs one batch at a time until timings arrive, so
// that a message that crashes the process takes few neighbours with it.
//
// Stop is graceful and bounded: the worker stops receiving, lets in-flight
// batches finish until shortly before Stop's deadline, then cancels them
// and releases their messages with visibility 0, returning by the
// deadline. Cancelling Run's context calls Stop with
// Config.ShutdownTimeout. Run returns nil after a requested stop and the
// cause when the worker stopped by itself (its queue or its engine was
// closed). Publishing is idempotent by request id + decision
// id (see package sink), so a message released or redelivered after a crash
// publishes the same records again.
//
// Metrics are registered on Config.Registry (or a registry of the worker's
// own) and served by Handler. Logs never contain state text unless
// Config.LogState is set.
package worker
