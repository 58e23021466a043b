// Package client is a Go client for a verdict server in both of its
// formats: System One (POST /v1/systemone, GET /v1/models) and the
// SageMaker container contract (POST /invocations, SemIf batches).
//
// Every call retries what is worth retrying — connection errors, 408, 429,
// 529 (System One's "overloaded") and 5xx (503 on the SageMaker routes) —
// with an exponential backoff with jitter built fresh for the call, waits
// a longer Retry-After instead, and never waits past Retry.MaxElapsed or
// the context's deadline. Everything else is returned at once as an
// *APIError that decodes either error shape. Do and ParseRetryAfter are
// the same policy for other transports (engine/sagemaker uses them around
// the AWS SDK).
package client
