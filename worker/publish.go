package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/verdict-dev/verdict/internal/sink"
)

// publish hands a job's records to every sink, then to the reply webhook
// when a record names a reply target, skipping the sinks that accepted
// them on an earlier receive of the same message (see publishMemo). A
// permanent failure is logged and counted but does not hold the message
// back; a transient one becomes the job's outcome (a *publishError), and
// so does the end of the job's context (its cause).
func (w *Worker) publish(j *job) error {
	if len(j.records) == 0 {
		return nil
	}
	for i, s := range w.cfg.Sinks {
		if err := w.publishTo(j, s, i); err != nil {
			return err
		}
	}
	if hasReply(j.records) && !w.webhookIsSink() {
		if w.cfg.Webhook == nil {
			if !w.memo.has(j.msg.ID, memoReply) {
				w.m.replyIgnored.Inc()
				w.memo.add(j.msg.ID, memoReply)
			}
		} else if err := w.publishTo(j, w.cfg.Webhook, memoReply); err != nil {
			return err
		}
	}
	for i := range j.records {
		w.m.decisions.WithLabelValues(string(j.records[i].Status)).Inc()
	}
	return nil
}

// publishTo hands a job's records to one sink, named memoKey in the
// publish memo, unless the memo says it has them already.
func (w *Worker) publishTo(j *job, s sink.Sink, memoKey int) error {
	if w.memo.has(j.msg.ID, memoKey) {
		return nil
	}
	if err := w.callSink(j, s); err != nil {
		if j.ctx.Err() != nil {
			return context.Cause(j.ctx)
		}
		if !permanent(err) {
			w.m.publishErrors.WithLabelValues(s.Name(), "transient").Inc()
			return &publishError{sink: s.Name(), err: err}
		}
		w.m.publishErrors.WithLabelValues(s.Name(), "permanent").Inc()
		w.log.Error("publish failed for good", "sink", s.Name(), "message_id", j.msg.ID, "err", err)
	} else {
		w.m.published.WithLabelValues(s.Name()).Add(float64(len(j.records)))
	}
	w.memo.add(j.msg.ID, memoKey)
	return nil
}

// callSink makes one Publish call within the job's deadline.
func (w *Worker) callSink(j *job, s sink.Sink) error {
	_, err := await(j.ctx, func() (struct{}, error) { return struct{}{}, s.Publish(j.ctx, j.records) })
	var pe *panicError
	if errors.As(err, &pe) {
		w.m.panics.Inc()
		w.log.Error("panic in sink", "sink", s.Name(), "panic", fmt.Sprint(pe.value), "stack", string(pe.stack))
	}
	return err
}

// hasReply reports whether a record names a reply target.
func hasReply(recs []sink.Record) bool {
	for i := range recs {
		if len(recs[i].Reply) > 0 {
			return true
		}
	}
	return false
}

// webhookIsSink reports whether the reply webhook is also one of the
// sinks: it then posts to the reply URLs already, and a second pass would
// deliver every record twice.
func (w *Worker) webhookIsSink() bool {
	if w.cfg.Webhook == nil {
		return false
	}
	for _, s := range w.cfg.Sinks {
		if wh, ok := s.(*sink.Webhook); ok && wh == w.cfg.Webhook {
			return true
		}
	}
	return false
}
