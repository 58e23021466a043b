// Package lambda is verdict's front door: it accepts decision requests over
// HTTP, checks them, and enqueues them for the workers. It never scores.
//
// A request travels through one Handler, whatever transport brought it:
//
//	API Gateway HTTP API (payload 2.0) ─┐
//	Lambda Function URL                 ├─▶ Request ─▶ Handler.Handle ─▶ Response
//	net/http (verdict up)               ┘
//
// Handle does, in order:
//
//  1. path and method: POST /v1/decisions (SemIf: one decision, bare or
//     under "decision", or a batch under "decisions") and
//     POST /v1/systemone/async (System One: one state, typed questions);
//  2. content type (415), body size (413);
//  3. authentication by package auth's rules, shared with verdict serve:
//     an API key (Authorization: Bearer or X-Api-Key) whose SHA-256 is
//     compared in constant time with the configured keys', or the identity
//     API Gateway's authorizer put in the request context (401);
//  4. parsing and validation with package decision: 400 for malformed JSON,
//     413 for size limits, 422 listing every field problem with its path;
//  5. authorization by the policy, for every decision, before anything is
//     enqueued (403);
//  6. grouping: decisions that share a state travel in one queue message
//     (queue.Envelope), keyed by the state's group key;
//  7. routing: the Router picks the cpu or gpu queue for each group;
//  8. enqueueing, at most ten messages per Send call, with the group key
//     as FIFO MessageGroupId and a deduplication id derived from the
//     Idempotency-Key header (or the body's sha256) — a retried client
//     request is not enqueued twice inside the queue's dedup window;
//  9. 202 Accepted with the request id, the decision ids, the route and
//     where the results will appear; a queue failure is 503 with
//     Retry-After.
//
// Errors never carry stack traces or internal detail: internal failures are
// logged with the request id and answered with a generic message.
//
// The Lambda adapters are HandleHTTPAPI and HandleFunctionURL; cmd/bootstrap
// starts the first with aws-lambda-go (both event sources share the 2.0
// payload shape). ServeHTTP serves the same paths over net/http.
package lambda
