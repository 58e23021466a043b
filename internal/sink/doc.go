// Package sink publishes decision results.
//
// The worker turns every decided decision into a Record (request id,
// decision id, tenant, status and the full decision.Result) and hands the
// records of one queue message to each configured Sink. A message is
// deleted from its queue only after every sink accepted its records, so a
// crash between publishing and deleting publishes the same records again:
// sinks are idempotent by Record.Key (request id + decision id), and a
// Record always encodes to the same bytes.
//
// Sinks:
//
//   - SQS: one message per record on a results queue, with request_id,
//     decision_id and status message attributes; on a FIFO queue the
//     deduplication id is derived from the key, so SQS drops redeliveries
//     within its five-minute window.
//   - SNS: one notification per record on a topic, with the same attributes.
//   - Webhook: one POST per record, signed with HMAC-SHA256 over the
//     timestamp and the body; retried with backoff; only to allowed hosts
//     and never to loopback, link-local or cloud metadata addresses unless
//     configured.
//   - Store: a local SQLite results store keyed by request id + decision id
//     that keeps the first copy, with lookups by request and by decision.
package sink
