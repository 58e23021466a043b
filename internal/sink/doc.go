// Package sink publishes decision results, and events about decisions.
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
//
// The results stores that keep records for lookups (package results) are
// Sinks too.
//
// The SQS, SNS and webhook sinks are also EventSinks: they publish an
// Event (today a feedback answer) to the same queue, topic or configured
// webhook URL as records, with the event's body as the message. SQS and
// SNS messages carry the attributes event (the kind), request_id and
// decision_id, grouped and deduplicated on FIFO targets as records are;
// webhook POSTs are signed as records are and carry the kind in
// X-Verdict-Event. A consumer tells events from records by that attribute
// or header, which records never have.
package sink
