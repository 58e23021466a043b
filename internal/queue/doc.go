// Package queue carries decisions from the front door to workers.
//
// A message body is an Envelope (versioned JSON: the decisions of one
// request that share one state, plus routing metadata and reply targets).
// The front door encodes it with Envelope.Marshal, which refuses bodies over
// SQS's 1 MiB limit, and enqueues it through a Sender.
//
// Workers consume through Queue, one small interface with two
// implementations that share its semantics (at-least-once delivery):
//
//   - SQS (Amazon SQS through aws-sdk-go-v2, standard or FIFO queues; an
//     endpoint URL points it at moto or LocalStack);
//   - Local (an embedded, durable queue in one SQLite file, for `verdict up`
//     and single-machine deployments).
//
// Receive hides the received messages for a visibility timeout and counts
// the receive. A consumer deletes a message once its results are published,
// extends its visibility while it is still working (ChangeVisibility), or
// releases it early (ChangeVisibility with a short or zero timeout). A
// message that is received too often goes to the dead-letter queue: by the
// redrive policy on SQS, by LocalConfig.MaxReceives in the local queue.
package queue
