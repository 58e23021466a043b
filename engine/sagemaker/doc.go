// Package sagemaker is an engine.Scorer that scores decisions on a remote
// SageMaker real-time endpoint running verdict (or anything that answers
// verdict's SemIf batch shape).
//
// Score groups its decisions by state, so that decisions sharing a state
// travel in one request and the endpoint can reuse the state's prefix:
//
//	[]decision.Decision ─▶ groups by state ─▶ {"decisions": […]} ─▶ InvokeEndpoint
//	                                          (≤ MaxBatch each)       │ retry on 503/429/5xx/
//	[]decision.Result ◀── back in input order ◀── {"results": […]} ◀──┘ connection errors
//
// Retrying is done here, with github.com/sethvargo/go-retry, and the AWS
// SDK's own retryer is switched off on every call, so the two never
// multiply. Each InvokeEndpoint call gets a fresh backoff (backoffs are
// stateful): exponential from Config.BaseDelay, capped at Config.MaxDelay,
// with ±20 % jitter; a Retry-After header, when longer, is waited instead
// (up to Config.MaxRetryAfter). Attempts stop at Config.MaxAttempts or when
// the next wait would pass Config.MaxElapsed or the context's deadline.
//
// What is retried: HTTP 429 and every 5xx (ServiceUnavailable,
// InternalFailure, throttling…), a ModelError whose container answered
// 429 or 503 (a verdict container shedding load), connection errors and
// attempts that ran past Config.AttemptTimeout. Other 4xx answers — a
// ModelError (424) of a failing container, a ValidationError — are not
// retried: the decisions of that request get error results (code
// "engine") and the other requests of the call go on.
//
// When retries are exhausted, Score returns an error that wraps
// engine.ErrUnavailable, so engine.Retryable is true and a queue worker
// releases the message with a delay instead of losing it.
package sagemaker
