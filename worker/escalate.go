package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/policy"
)

// memoEscalate stands for the escalation sends in a publishMemo.
const memoEscalate = -2

// stage is where the worker's policy evaluates a message's decisions: on
// this worker's pool (Config.Pool, else the pool the message was sent
// to), after the pools its cascade visited, able to send decisions on to
// the pools of Config.Escalate.
func (w *Worker) stage(env *queue.Envelope) policy.Stage {
	pool := w.cfg.Pool
	if pool == decision.RouteAuto {
		pool = env.Route
	}
	return policy.Stage{Pool: pool, Visited: env.Visited(), Pools: w.escalationPools}
}

// settle turns a message's policy results into what the worker does with
// them: a record to publish for every settled decision, and, per pool, the
// positions of the decisions the policy escalated there. A decision that
// came through a cascade gets its stages, this one last.
func (w *Worker) settle(j *job, rs []decision.Result) (recs []sink.Record, esc map[decision.Route][]int) {
	for i := range rs {
		r := rs[i]
		if r.Outcome != nil && r.Outcome.Status == decision.StatusEscalate && r.Outcome.Escalate != "" {
			if esc == nil {
				esc = map[decision.Route][]int{}
			}
			esc[r.Outcome.Escalate] = append(esc[r.Outcome.Escalate], i)
			continue
		}
		if len(j.env.Cascade) > 0 {
			r.Cascade = w.stages(j, i, &r, true)
		}
		recs = append(recs, w.record(j.env, i, r))
	}
	return recs, esc
}

// stages is the cascade of the message's i-th decision so far, r (its
// result on this worker's pool) last: a new list, the envelope's stays as
// it is. The timing of r is left out unless the worker publishes timing (a
// redelivered message then sends identical bytes on).
func (w *Worker) stages(j *job, i int, r *decision.Result, decided bool) []decision.CascadeStage {
	var before []decision.CascadeStage
	if len(j.env.Cascade) > 0 {
		before = j.env.Cascade[i]
	}
	s := decision.StageOf(j.stage.Pool, r, decided)
	if !w.cfg.PublishTiming {
		s.Timing = nil
	}
	return append(append(make([]decision.CascadeStage, 0, len(before)+1), before...), s)
}

// escalate sends the decisions the policy escalated on to their pools'
// queues, one message per pool: the same request, tenant, caller and reply
// targets, each decision keyed as before (its id, or its position in the
// first message) and carrying its stages so far. It runs before the
// message's own records are published, so a target that refuses leaves
// nothing published: the message is released and retried like a failed
// publish. A second receive of the message by this worker skips the sends
// it made (the publish memo); the local queue and FIFO queues also drop a
// repeat by its deduplication id, and the results stores keep the first
// final result of a decision.
func (w *Worker) escalate(j *job, rs []decision.Result, esc map[decision.Route][]int) error {
	if len(esc) == 0 || w.memo.has(j.msg.ID, memoEscalate) {
		return nil
	}
	pool := j.stage.Pool
	pools := make([]decision.Route, 0, len(esc))
	for p := range esc {
		pools = append(pools, p)
	}
	sort.Slice(pools, func(a, b int) bool { return pools[a] < pools[b] })
	for _, to := range pools {
		q := w.cfg.Escalate[to]
		if q == nil {
			// The policy's Stage names only Config.Escalate's pools.
			return fmt.Errorf("worker: escalation to %s, which has no queue", to)
		}
		msgs, err := w.escalationMessages(j, rs, esc[to], to)
		if err != nil {
			return err
		}
		for start := 0; start < len(msgs); start += queue.MaxBatch {
			batch := msgs[start:min(start+queue.MaxBatch, len(msgs))]
			errs, err := await(j.ctx, func() ([]error, error) { return q.Send(j.ctx, batch) })
			if err == nil {
				err = errors.Join(errs...)
			}
			if err != nil {
				if j.ctx.Err() != nil {
					return context.Cause(j.ctx)
				}
				w.m.publishErrors.WithLabelValues("escalate:"+string(to), "transient").Inc()
				return &publishError{sink: "escalate:" + string(to), err: err}
			}
		}
		w.m.escalated.WithLabelValues(string(pool), string(to)).Add(float64(len(esc[to])))
		w.log.Info("decisions escalated", "request_id", j.env.RequestID, "from", pool, "to", to, "decisions", len(esc[to]))
	}
	w.memo.add(j.msg.ID, memoEscalate)
	return nil
}

// escalationMessages encodes the decisions at positions idx as messages
// for pool to: one message when it fits, else one per decision.
func (w *Worker) escalationMessages(j *job, rs []decision.Result, idx []int, to decision.Route) ([]queue.Outgoing, error) {
	from := j.stage.Pool
	build := func(idx []int) (queue.Outgoing, error) {
		env := *j.env
		env.Route = to
		env.Decisions = make([]decision.Decision, len(idx))
		env.Cascade = make([][]decision.CascadeStage, len(idx))
		keys := make([]string, len(idx))
		for k, i := range idx {
			d := j.env.Decisions[i]
			d.ID = decisionID(&d, i) // its key stays the one of the first message
			env.Decisions[k] = d
			env.Cascade[k] = w.stages(j, i, &rs[i], false)
			keys[k] = d.ID
		}
		body, err := env.Marshal()
		if err != nil {
			return queue.Outgoing{}, err
		}
		sum := sha256.Sum256([]byte(env.RequestID + "\x00" + string(from) + "\x00" + string(to) + "\x00" + strings.Join(keys, "\x00")))
		return queue.Outgoing{Body: body, GroupID: env.GroupKey, DedupID: hex.EncodeToString(sum[:]),
			Attributes: map[string]string{"request_id": env.RequestID, "escalated_from": string(from)}}, nil
	}
	m, err := build(idx)
	if err == nil {
		return []queue.Outgoing{m}, nil
	}
	if !errors.Is(err, queue.ErrTooLarge) || len(idx) == 1 {
		return nil, &escalationError{to: to, err: err}
	}
	out := make([]queue.Outgoing, 0, len(idx))
	for _, i := range idx {
		m, err := build([]int{i})
		if err != nil {
			return nil, &escalationError{to: to, err: err}
		}
		out = append(out, m)
	}
	return out, nil
}

// escalationError: decisions could not be encoded for their escalation
// pool (a state that fits one message but not with its cascade). Retrying
// cannot help; the message goes on to the dead-letter queue with the
// redrive policy.
type escalationError struct {
	to  decision.Route
	err error
}

func (e *escalationError) Error() string {
	return fmt.Sprintf("escalate to %s: %v", e.to, e.err)
}
func (e *escalationError) Unwrap() error { return e.err }
