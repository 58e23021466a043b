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
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/router"
)

// queueOpTimeout bounds a delete or release, which still run while the
// worker stops.
const queueOpTimeout = 15 * time.Second

// releaseGrace is the time a stop whose context is already done (a second
// signal, a zero shutdown timeout) gives the releases of what it held.
const releaseGrace = 2 * time.Second

// Worker consumes one queue. Build it with New, run it with Run, stop it
// with Stop (or by cancelling Run's context).
type Worker struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	work     context.Context // cancelled by a hard stop
	hardStop context.CancelCauseFunc
	recv     context.Context // cancelled when receiving stops
	stopRecv context.CancelFunc

	started   atomic.Bool
	loopDone  chan struct{} // closed when the receive loop has returned
	closed    chan struct{} // closed when every batch has finished
	batches   sync.WaitGroup
	runOnce   sync.Once
	releaseBy atomic.Int64 // UnixNano by which a hard stop's releases must end; 0: none

	causeMu sync.Mutex
	cause   error // why the worker stopped by itself (nil: it was asked to)

	// How much to take: guarded by mu; freed is closed and replaced when a
	// batch ends.
	mu      sync.Mutex
	busy    int           // batches in flight
	freed   chan struct{} // closed when busy drops
	perMsg  time.Duration // moving average of processing time per message; 0: none measured
	suspect bool          // the last receive held a message delivered before

	memo *publishMemo
}

// New validates cfg and builds a worker.
func New(cfg Config) (*Worker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	w := &Worker{cfg: cfg, log: cfg.Logger.With("component", "worker"), loopDone: make(chan struct{}), closed: make(chan struct{}),
		freed: make(chan struct{}), memo: newPublishMemo(publishMemoSize)}
	w.m = newMetrics(cfg)
	w.work, w.hardStop = context.WithCancelCause(context.Background())
	w.recv, w.stopRecv = context.WithCancel(w.work)
	return w, nil
}

// Closed is closed once the worker has stopped and every message it held
// was deleted or released.
func (w *Worker) Closed() <-chan struct{} { return w.closed }

// Run receives and processes messages until the worker is stopped. When
// ctx is cancelled it stops within Config.ShutdownTimeout (see Stop). It
// returns nil after a requested stop (ctx cancelled or Stop called), and
// the cause when the worker stopped by itself: the queue was closed or
// does not exist (queue.ErrClosed, queue.ErrNoQueue), the engine was
// closed (engine.ErrClosed).
func (w *Worker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("worker: Run called twice")
	}
	w.log.Info("worker started", "concurrency", w.cfg.Concurrency, "visibility", w.cfg.Visibility, "max_messages", w.cfg.MaxMessages,
		"message_timeout", w.cfg.MessageTimeout)
	stopDone := make(chan struct{})
	go func() {
		defer close(stopDone)
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), w.cfg.ShutdownTimeout)
			defer cancel()
			_ = w.Stop(sctx)
		case <-w.closed:
		}
	}()
	w.loop()
	w.batches.Wait()
	w.finish()
	<-stopDone
	if err := w.stopCause(); err != nil {
		w.log.Error("worker stopped", "err", err)
		return err
	}
	w.log.Info("worker stopped")
	return nil
}

func (w *Worker) finish() {
	w.runOnce.Do(func() {
		w.hardStop(errStopping)
		close(w.closed)
	})
}

// fail stops the worker for a reason of its own: receiving ends, the
// batches in flight finish, and Run returns err.
func (w *Worker) fail(err error) {
	w.causeMu.Lock()
	if w.cause == nil {
		w.cause = err
		w.log.Error("worker stopping by itself", "err", err)
	}
	w.causeMu.Unlock()
	w.stopRecv()
}

func (w *Worker) stopCause() error {
	w.causeMu.Lock()
	defer w.causeMu.Unlock()
	return w.cause
}

// Stop stops receiving and waits for in-flight batches, and never longer
// than ctx allows. Shortly before ctx's deadline (a fifth of the time
// left, at most 2 s, is kept for it) the batches still running are
// cancelled — calls that do not return are abandoned — and their
// unfinished messages released with visibility 0; Stop waits for those
// releases until the deadline and returns ctx's error
// (context.DeadlineExceeded when the deadline is near but not past). A ctx
// that is already done (a second signal) releases at once, giving the
// releases at most 2 s. Messages whose release did not finish in time
// come back when their visibility ends.
func (w *Worker) Stop(ctx context.Context) error {
	w.stopRecv()
	if !w.started.Load() {
		w.finish()
		return nil
	}
	deadline, hasDeadline := ctx.Deadline()
	soft := ctx
	if hasDeadline {
		keep := min(releaseGrace, time.Until(deadline)/5)
		var cancel context.CancelFunc
		soft, cancel = context.WithDeadline(ctx, deadline.Add(-keep))
		defer cancel()
	}
	select {
	case <-w.closed:
		return nil
	case <-soft.Done():
	}
	by := time.Now().Add(releaseGrace)
	if hasDeadline && deadline.After(time.Now()) {
		by = deadline
	}
	w.setReleaseBy(by)
	w.log.Warn("shutdown deadline reached: releasing unfinished messages")
	w.hardStop(errStopping)
	t := time.NewTimer(time.Until(by))
	defer t.Stop()
	select {
	case <-w.closed:
	case <-t.C:
		w.log.Warn("shutdown deadline passed before every release was made: those messages come back when their visibility ends")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// setReleaseBy lowers the time by which a hard stop's queue calls end.
func (w *Worker) setReleaseBy(t time.Time) {
	n := t.UnixNano()
	for {
		old := w.releaseBy.Load()
		if old != 0 && old <= n {
			return
		}
		if w.releaseBy.CompareAndSwap(old, n) {
			return
		}
	}
}

// queueContext bounds a delete or release: queueOpTimeout, and no later
// than a hard stop's deadline.
func (w *Worker) queueContext() (context.Context, context.CancelFunc) {
	d := time.Now().Add(queueOpTimeout)
	if by := w.releaseBy.Load(); by != 0 && w.work.Err() != nil {
		if t := time.Unix(0, by); t.Before(d) {
			d = t
		}
	}
	return context.WithDeadline(context.Background(), d)
}

// loop receives until receiving stops.
func (w *Worker) loop() {
	defer close(w.loopDone)
	for {
		if !w.acquire() {
			return
		}
		msgs, err := w.cfg.Queue.Receive(w.recv, queue.ReceiveOptions{Max: w.receiveMax(), Wait: w.cfg.Wait, Visibility: w.cfg.Visibility})
		if err != nil {
			w.releaseSlot()
			if w.recv.Err() != nil {
				if len(msgs) > 0 {
					w.batches.Add(1)
					go w.release(msgs) // never happens with our queues, but never lose a message
				}
				return
			}
			if errors.Is(err, queue.ErrClosed) || errors.Is(err, queue.ErrNoQueue) {
				w.fail(fmt.Errorf("worker: receive: %w", err))
				return
			}
			w.m.receiveErrors.Inc()
			w.log.Error("receive failed", "err", err)
			select {
			case <-time.After(time.Second):
			case <-w.recv.Done():
				return
			}
			continue
		}
		if len(msgs) == 0 {
			w.releaseSlot()
			continue
		}
		w.m.received.Add(float64(len(msgs)))
		w.m.inFlight.Add(float64(len(msgs)))
		w.noteReceived(msgs)
		w.batches.Add(1)
		go w.processReceived(msgs)
	}
}

// acquire waits for a batch slot: Concurrency of them, or one while the
// worker is cautious (see cautious). It reports false when receiving
// stops first.
func (w *Worker) acquire() bool {
	for {
		w.mu.Lock()
		limit := w.cfg.Concurrency
		if w.cautiousLocked() {
			limit = 1
		}
		if w.busy < limit {
			w.busy++
			w.mu.Unlock()
			return true
		}
		freed := w.freed
		w.mu.Unlock()
		select {
		case <-freed:
		case <-w.recv.Done():
			return false
		}
	}
}

func (w *Worker) releaseSlot() {
	w.mu.Lock()
	w.busy--
	close(w.freed)
	w.freed = make(chan struct{})
	w.mu.Unlock()
}

// cautiousLocked: the worker takes one message, one batch at a time, while
// it has measured nothing (a fresh worker cannot know what fits in the
// visibility timeout, and after a crash it is what a restarted worker
// sees first) and after a receive that held a message delivered before:
// when a message crashes workers, it then crashes one holding nothing
// else, instead of taking the messages received with it toward the
// dead-letter queue. Callers hold w.mu.
func (w *Worker) cautiousLocked() bool { return w.perMsg == 0 || w.suspect }

// receiveMax is how many messages to take now: at most MaxMessages, one
// while the worker is cautious, and no more than the measured processing
// time says will finish within half the visibility timeout.
func (w *Worker) receiveMax() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cautiousLocked() {
		return 1
	}
	n := int((w.cfg.Visibility / 2) / w.perMsg)
	return max(1, min(n, w.cfg.MaxMessages))
}

// redelivered reports whether a message's receive count says it was
// received before: by a worker that crashed or was stopped, or whose
// visibility ended, or that released it after a failure.
func redelivered(m queue.Message) bool { return m.ReceiveCount > 1 }

func (w *Worker) noteReceived(msgs []queue.Message) {
	for _, m := range msgs {
		if redelivered(m) {
			w.mu.Lock()
			w.suspect = true
			w.mu.Unlock()
			return
		}
	}
}

// observe records the processing time of n messages; a receive without
// redelivered messages ends the caution they caused.
func (w *Worker) observe(d time.Duration, n int, hadRedelivered bool) {
	if n == 0 {
		return
	}
	per := max(d/time.Duration(n), time.Nanosecond)
	w.mu.Lock()
	if w.perMsg == 0 {
		w.perMsg = per
	} else {
		w.perMsg = (w.perMsg*7 + per) / 8
	}
	if !hadRedelivered {
		w.suspect = false
	}
	w.mu.Unlock()
}

func (w *Worker) release(msgs []queue.Message) {
	defer w.batches.Done()
	jobs := make([]*job, len(msgs))
	for i := range msgs {
		jobs[i] = &job{msg: msgs[i], err: errStopping}
	}
	w.m.inFlight.Add(float64(len(msgs)))
	w.act(jobs)
}

// job is one message being processed.
type job struct {
	msg     queue.Message
	ctx     context.Context // the message's work: ends at its deadline or a hard stop
	env     *queue.Envelope
	flow    *policy.Flow        // the message's decisions through the policy
	pending []decision.Decision // what the policy left to score
	scored  []decision.Result   // one result per pending decision
	records []sink.Record
	err     error       // the outcome; nil = success so far
	acted   atomic.Bool // deleted or released: the heartbeat leaves it alone
	hold    *sync.Mutex // shared by a receive's jobs: an extension and an action do not interleave
}

// member is one decision of one job to be scored.
type member struct {
	job *job
	idx int // in job.pending and job.scored
}

// processReceived processes the messages of one receive. A message
// delivered before is processed first and alone (its own batch), so that
// if it is what crashed a worker, it crashes one that holds no scored work
// of other messages; the others are processed together after it.
func (w *Worker) processReceived(msgs []queue.Message) {
	defer w.batches.Done()
	defer w.releaseSlot()
	start := time.Now()
	jobs := make([]*job, len(msgs))
	hold := &sync.Mutex{}
	for i := range msgs {
		jobs[i] = &job{msg: msgs[i], hold: hold}
	}
	hb := w.heartbeat(jobs)
	defer hb()
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
	w.observe(d, len(msgs), hadRedelivered)
}

// processBatch scores, publishes and acts on jobs received together,
// within one message deadline (Config.MessageTimeout).
func (w *Worker) processBatch(jobs []*job) {
	ctx, cancel := context.WithTimeoutCause(w.work, w.cfg.MessageTimeout, errDeadline)
	defer cancel()
	for _, j := range jobs {
		j.ctx = ctx
	}
	groups := map[string][]member{}
	var order []string
	for _, j := range jobs {
		w.protect(j, func() { w.prepare(j) })
		if j.err != nil || j.env == nil {
			continue
		}
		for i := range j.pending {
			k := router.GroupKey(j.pending[i].State)
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], member{job: j, idx: i})
		}
	}
	// Groups are scored in parallel, but their results are assigned to the
	// jobs one group at a time: a message whose decisions span several
	// states belongs to several groups, and assign writes its job.
	var wg sync.WaitGroup
	var assignMu sync.Mutex
	for _, k := range order {
		wg.Add(1)
		go func(ms []member) {
			defer wg.Done()
			w.score(ctx, ms, &assignMu)
		}(groups[k])
	}
	wg.Wait()
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
			j.err = &panicError{value: v, stack: debug.Stack()}
			w.log.Error("panic while processing a message", "message_id", j.msg.ID, "panic", fmt.Sprint(v), "stack", string(j.err.(*panicError).stack))
		}
	}()
	f()
}

// prepare decodes a message and starts its decisions through the policy
// flow (one policy for all of them, even across a reload).
// Invalid messages get their error records published here.
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
	caller := policy.Caller{Tenant: env.Tenant, APIKeySHA256: env.APIKeySHA256, Metadata: env.Metadata}
	j.flow = w.cfg.Policy.Current().Start(env.Decisions, caller)
	j.pending = j.flow.Pending()
	j.scored = make([]decision.Result, len(j.pending))
	if w.cfg.LogState && w.log.Enabled(context.Background(), slog.LevelDebug) {
		w.log.Debug("message", "message_id", j.msg.ID, "request_id", env.RequestID, "state", env.Decisions[0].State.Render())
	} else {
		w.log.Debug("message", "message_id", j.msg.ID, "request_id", env.RequestID, "decisions", len(env.Decisions), "receive_count", j.msg.ReceiveCount)
	}
}

// score runs one engine call for decisions that share a state. When that
// call fails for a reason other than load, shutdown or the deadline and
// the decisions come from several messages, each message's decisions are
// scored again on their own, so that one poison message does not drag the
// messages merged with it to the dead-letter queue.
func (w *Worker) score(ctx context.Context, ms []member, assignMu *sync.Mutex) {
	assign := func(ms []member, rs []decision.Result, err error) {
		assignMu.Lock()
		defer assignMu.Unlock()
		w.assign(ctx, ms, rs, err)
	}
	rs, err := w.callScorer(ctx, ms)
	if err != nil && !engine.Retryable(err) && !errors.Is(err, engine.ErrClosed) && ctx.Err() == nil {
		if parts := splitByJob(ms); len(parts) > 1 {
			w.log.Warn("merged engine call failed; scoring its messages one by one", "err", err, "messages", len(parts))
			for _, p := range parts {
				prs, perr := w.callScorer(ctx, p)
				assign(p, prs, perr)
			}
			return
		}
	}
	assign(ms, rs, err)
}

func splitByJob(ms []member) [][]member {
	var parts [][]member
	index := map[*job]int{}
	for _, m := range ms {
		i, ok := index[m.job]
		if !ok {
			i = len(parts)
			index[m.job] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], m)
	}
	return parts
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

// callScorer makes one Scorer call within ctx, recovering a panic into an
// error. Once ctx has ended, whatever the call returned is dropped for
// ctx's cause.
func (w *Worker) callScorer(ctx context.Context, ms []member) ([]decision.Result, error) {
	ds := make([]decision.Decision, len(ms))
	for i, m := range ms {
		ds[i] = m.job.pending[m.idx]
	}
	start := time.Now()
	rs, err := await(ctx, func() ([]decision.Result, error) { return w.cfg.Scorer.Score(ctx, ds) })
	w.m.scoreSeconds.Observe(time.Since(start).Seconds())
	var pe *panicError
	if errors.As(err, &pe) {
		w.m.panics.Inc()
		w.log.Error("panic in scorer", "panic", fmt.Sprint(pe.value), "stack", string(pe.stack))
	}
	if err == nil && len(rs) != len(ds) {
		err = fmt.Errorf("worker: scorer returned %d results for %d decisions", len(rs), len(ds))
	}
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	if err == nil {
		for i := range rs {
			if closedResult(rs[i].Error) {
				err = fmt.Errorf("decision %q: %w", ds[i].ID, engine.ErrClosed)
				break
			}
		}
	}
	if errors.Is(err, engine.ErrClosed) {
		// The engine is gone: every message would fail the same way.
		w.fail(fmt.Errorf("worker: scorer: %w", err))
	}
	return rs, err
}

// assign records a scorer call's results (or its failure) in the jobs.
func (w *Worker) assign(ctx context.Context, ms []member, rs []decision.Result, err error) {
	for i, m := range ms {
		j := m.job
		if err != nil {
			if j.err == nil {
				j.err = err
			}
			continue
		}
		if rs[i].Error != nil && rs[i].Error.Retryable && j.err == nil {
			j.err = rs[i].Error
			if ctx.Err() != nil {
				j.err = context.Cause(ctx)
			}
		}
		j.scored[m.idx] = rs[i]
	}
}

// finishJob finishes the message's policy flow and publishes its records.
// A whole-call scoring failure never gets here: it is the job's error, and
// the message is released rather than settled by on_error.
func (w *Worker) finishJob(j *job) {
	rs, err := j.flow.Finish(j.scored, nil)
	if err != nil {
		j.err = err
		return
	}
	j.records = make([]sink.Record, len(rs))
	for i := range rs {
		j.records[i] = w.record(j.env, i, rs[i])
	}
	j.err = w.publish(j)
}

// publish hands a job's records to every sink, skipping the sinks that
// accepted them on an earlier receive of the same message (see
// publishMemo). A permanent failure is logged and counted but does not
// hold the message back; a transient one becomes the job's outcome.
func (w *Worker) publish(j *job) error {
	if len(j.records) == 0 {
		return nil
	}
	for i, s := range w.cfg.Sinks {
		if w.memo.has(j.msg.ID, i) {
			continue
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
		w.memo.add(j.msg.ID, i)
	}
	hasReply := false
	for i := range j.records {
		if len(j.records[i].Reply) > 0 {
			hasReply = true
			break
		}
	}
	if hasReply && !w.webhookIsSink() && !w.memo.has(j.msg.ID, memoReply) {
		if w.cfg.Webhook == nil {
			w.m.replyIgnored.Inc()
		} else if err := w.callSink(j, w.cfg.Webhook); err != nil {
			if j.ctx.Err() != nil {
				return context.Cause(j.ctx)
			}
			if !permanent(err) {
				w.m.publishErrors.WithLabelValues("webhook", "transient").Inc()
				return &publishError{sink: "webhook", err: err}
			}
			w.m.publishErrors.WithLabelValues("webhook", "permanent").Inc()
			w.log.Error("webhook failed for good", "message_id", j.msg.ID, "err", err)
		} else {
			w.m.published.WithLabelValues("webhook").Add(float64(len(j.records)))
		}
		w.memo.add(j.msg.ID, memoReply)
	}
	for i := range j.records {
		w.m.decisions.WithLabelValues(string(j.records[i].Status)).Inc()
	}
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

// act applies each job's action: deletes in batches, releases with their
// delays. It runs even while the worker stops hard, until the stop's
// deadline.
func (w *Worker) act(jobs []*job) {
	ctx, cancel := w.queueContext()
	defer cancel()
	stopping := w.work.Err() != nil
	var dels []*job
	var rels []queue.Visibility
	var relJobs []*job
	for _, j := range jobs {
		if j.hold != nil {
			j.hold.Lock()
			j.acted.Store(true)
			j.hold.Unlock()
		}
		a := w.decide(j.err, j.msg.ReceiveCount, stopping)
		reqID := ""
		if j.env != nil {
			reqID = j.env.RequestID
		}
		switch a.verb {
		case verbDelete:
			dels = append(dels, j)
		case verbRelease:
			rels = append(rels, queue.Visibility{Receipt: j.msg.Receipt, Timeout: a.delay})
			relJobs = append(relJobs, j)
			w.m.released.WithLabelValues(a.reason).Inc()
			lvl := slog.LevelWarn
			if a.reason == "shutdown" {
				lvl = slog.LevelInfo
			}
			w.log.Log(ctx, lvl, "message released", "message_id", j.msg.ID, "request_id", reqID,
				"receive_count", j.msg.ReceiveCount, "reason", a.reason, "delay", a.delay, "err", errString(j.err))
		}
	}
	if len(dels) > 0 {
		receipts := make([]string, len(dels))
		for i, j := range dels {
			receipts[i] = j.msg.Receipt
		}
		errs, err := w.cfg.Queue.Delete(ctx, receipts)
		for i, j := range dels {
			e := err
			if e == nil && errs != nil {
				e = errs[i]
			}
			if e != nil {
				w.log.Error("delete failed: the message will be delivered again", "message_id", j.msg.ID, "err", e)
				continue
			}
			w.memo.forget(j.msg.ID)
			w.m.deleted.Inc()
		}
	}
	if len(rels) > 0 {
		errs, err := w.cfg.Queue.ChangeVisibility(ctx, rels)
		for i, j := range relJobs {
			e := err
			if e == nil && errs != nil {
				e = errs[i]
			}
			if e != nil {
				w.log.Error("release failed: the message comes back when its visibility ends", "message_id", j.msg.ID, "err", e)
			}
		}
	}
	w.m.inFlight.Sub(float64(len(jobs)))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// heartbeat extends the visibility of a receive's messages every
// Config.Heartbeat until they are acted on or the returned function is
// called. A message's deadline (Config.MessageTimeout) ends its extensions:
// its work is abandoned and it is released.
func (w *Worker) heartbeat(jobs []*job) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(w.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(w.work, w.cfg.Heartbeat)
			jobs[0].hold.Lock()
			for start := 0; start < len(jobs); start += queue.MaxBatch {
				end := min(start+queue.MaxBatch, len(jobs))
				vs := make([]queue.Visibility, 0, end-start)
				held := make([]*job, 0, end-start)
				for _, j := range jobs[start:end] {
					if !j.acted.Load() {
						vs = append(vs, queue.Visibility{Receipt: j.msg.Receipt, Timeout: w.cfg.Visibility})
						held = append(held, j)
					}
				}
				if len(vs) == 0 {
					continue
				}
				errs, err := w.cfg.Queue.ChangeVisibility(ctx, vs)
				if err != nil {
					w.log.Warn("visibility extension failed", "err", err)
					continue
				}
				for i, e := range errs {
					if e != nil {
						w.log.Warn("visibility extension failed", "message_id", held[i].msg.ID, "err", e)
					}
				}
				w.m.heartbeats.Add(float64(len(vs)))
			}
			jobs[0].hold.Unlock()
			cancel()
		}
	}()
	return func() { close(done); wg.Wait() }
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
