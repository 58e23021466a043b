package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/policy"
)

// job is one message being processed.
type job struct {
	msg     queue.Message
	ctx     context.Context // the message's work: ends at its deadline or when a stop abandons it
	env     *queue.Envelope
	stage   policy.Stage        // where in a cascade the message's decisions are (escalate.go)
	flow    *policy.Flow        // the message's decisions through the policy
	pending []decision.Decision // what the policy left to score
	scored  []decision.Result   // one result per pending decision
	records []sink.Record
	err     error       // the outcome; nil = success so far
	acted   atomic.Bool // deleted or released: the heartbeat leaves it alone
	// visibilityMu is shared by a receive's jobs: a heartbeat's extension
	// and act's marking of a job as acted do not interleave.
	visibilityMu *sync.Mutex
}

// processReceived processes the messages of one receive, then frees the
// receive's slot. A message delivered before is processed first and alone
// (its own batch), so that if it is what crashed a worker, it crashes one
// that holds no scored work of other messages; the others are processed
// together after it, as one batch.
func (w *Worker) processReceived(msgs []queue.Message) {
	defer w.receiving.Done()
	defer w.flow.freeSlot()
	start := time.Now()
	jobs := make([]*job, len(msgs))
	visibilityMu := &sync.Mutex{}
	for i := range msgs {
		jobs[i] = &job{msg: msgs[i], visibilityMu: visibilityMu}
	}
	stopHeartbeat := w.heartbeat(jobs)
	defer stopHeartbeat()
	var fresh []*job
	hadRedelivered := false
	for _, j := range jobs {
		if redelivered(j.msg) {
			hadRedelivered = true
			w.log.Info("message delivered before: processing it alone", "message_id", j.msg.ID, "receive_count", j.msg.ReceiveCount)
			w.processBatch([]*job{j})
			continue
		}
		fresh = append(fresh, j)
	}
	if len(fresh) > 0 {
		w.processBatch(fresh)
	}
	d := time.Since(start)
	w.m.batchSeconds.Observe(d.Seconds())
	w.flow.observe(d, len(msgs), hadRedelivered)
}

// processBatch takes jobs through every step within one message deadline
// (Config.MessageTimeout): decode and policy (prepare), scoring by state
// (score.go), policy and publishing (finishJob), and the queue action
// (act).
func (w *Worker) processBatch(jobs []*job) {
	ctx, cancel := context.WithTimeoutCause(w.work, w.cfg.MessageTimeout, errDeadline)
	defer cancel()
	for _, j := range jobs {
		j.ctx = ctx
		w.protect(j, func() { w.prepare(j) })
	}
	w.scoreByState(ctx, jobs)
	for _, j := range jobs {
		if j.err == nil && j.env != nil {
			w.protect(j, func() { w.finishJob(j) })
		}
	}
	if errors.Is(context.Cause(ctx), errDeadline) {
		w.log.Warn("message deadline passed: abandoning its work", "messages", len(jobs), "message_timeout", w.cfg.MessageTimeout)
	}
	w.act(jobs)
}

// protect runs f for a job, turning a panic into the job's outcome.
func (w *Worker) protect(j *job, f func()) {
	defer func() {
		if v := recover(); v != nil {
			w.m.panics.Inc()
			pe := &panicError{value: v, stack: debug.Stack()}
			j.err = pe
			w.log.Error("panic while processing a message", "message_id", j.msg.ID, "panic", fmt.Sprint(v), "stack", string(pe.stack))
		}
	}()
	f()
}

// prepare decodes a message and starts its decisions through the policy
// flow (one policy for all of them, even across a reload). An invalid
// message gets its error records published here.
func (w *Worker) prepare(j *job) {
	env, recs, err := decodeMessage(j.msg)
	if err != nil {
		w.m.invalid.Inc()
		w.log.Warn("invalid message", "message_id", j.msg.ID, "receive_count", j.msg.ReceiveCount, "err", err)
		j.records = recs
		j.err = &invalidError{err: err}
		if perr := w.publish(j); perr != nil {
			j.err = perr
		}
		return
	}
	j.env = env
	j.stage = w.stage(env)
	caller := policy.Caller{Tenant: env.Tenant, APIKeySHA256: env.APIKeySHA256, Metadata: env.Metadata, Stage: j.stage}
	j.flow = w.cfg.Policy.Current().Start(env.Decisions, caller)
	j.pending = j.flow.Pending()
	j.scored = make([]decision.Result, len(j.pending))
	if w.cfg.LogState && w.log.Enabled(context.Background(), slog.LevelDebug) {
		w.log.Debug("message", "message_id", j.msg.ID, "request_id", env.RequestID, "state", env.Decisions[0].State.Render())
	} else {
		w.log.Debug("message", "message_id", j.msg.ID, "request_id", env.RequestID, "decisions", len(env.Decisions), "receive_count", j.msg.ReceiveCount)
	}
}

// finishJob finishes the message's policy flow, sends the decisions the
// policy escalated on to their pools (escalate.go), then publishes the
// records of the others. A whole-call scoring failure never gets here: it
// is the job's error, and the message is released rather than settled by
// on_error.
func (w *Worker) finishJob(j *job) {
	rs, err := j.flow.Finish(j.scored, nil)
	if err != nil {
		j.err = err
		return
	}
	recs, esc := w.settle(j, rs)
	if err := w.escalate(j, rs, esc); err != nil {
		j.err = err
		return
	}
	j.records = recs
	j.err = w.publish(j)
}

// await runs f in a goroutine of its own and returns what it returns, or
// the cause of ctx's end when that comes first: f is then abandoned (it
// runs on, and what it returns is dropped), so that a call that never
// returns cannot hold a message. A panic in f becomes a *panicError.
func await[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type out struct {
		v   T
		err error
	}
	ch := make(chan out, 1)
	go func() {
		var o out
		defer func() {
			if v := recover(); v != nil {
				o = out{err: &panicError{value: v, stack: debug.Stack()}}
			}
			ch <- o
		}()
		o.v, o.err = f()
	}()
	select {
	case o := <-ch:
		return o.v, o.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}
