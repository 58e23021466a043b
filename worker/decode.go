package worker

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/sink"
)

// decodeMessage decodes a message body. On failure it also returns the
// error records to publish for it (one per decision that could be read, or
// one for the whole message), so that the sender learns why.
func decodeMessage(m queue.Message) (*queue.Envelope, []sink.Record, error) {
	env, err := queue.UnmarshalEnvelope(m.Body)
	if err == nil {
		return env, nil, nil
	}
	return nil, invalidRecords(m, env, err), err
}

// invalidRecords builds the error records of an invalid message.
func invalidRecords(m queue.Message, env *queue.Envelope, err error) []sink.Record {
	base := sink.Record{RequestID: "message:" + m.ID, Status: decision.StatusError, Format: queue.FormatSemIf}
	if m.ID == "" {
		base.RequestID = "message:unknown"
	}
	if env != nil && env.RequestID != "" {
		base.RequestID, base.Tenant, base.Format, base.Model, base.SubmittedAt = env.RequestID, env.Tenant, env.Format, env.Model, env.SubmittedAt
	}
	code := decision.CodeOf(err, decision.CodeInvalid)
	if env == nil || len(env.Decisions) == 0 {
		r := base
		r.DecisionID = "-"
		r.Result = decision.Result{Error: &decision.Error{Code: code, Message: err.Error()}}
		r.Result.Outcome = errorOutcome(err)
		return []sink.Record{r}
	}
	out := make([]sink.Record, 0, len(env.Decisions))
	for i := range env.Decisions {
		d := &env.Decisions[i]
		r := base
		r.DecisionID = decisionID(d, i)
		e := &decision.Error{Code: code, Message: err.Error()}
		var ve *decision.ValidationError
		if verr := d.Validate(decision.StructuralLimits(), fmt.Sprintf("decisions[%d]", i)); errors.As(verr, &ve) {
			e.Fields = ve.Errors
		}
		r.Result = decision.Result{ID: d.ID, Kind: d.Kind, OptionIDs: d.OptionIDs(), Error: e, Outcome: errorOutcome(err)}
		out = append(out, r)
	}
	return out
}

func errorOutcome(err error) *decision.Outcome {
	return &decision.Outcome{Status: decision.StatusError, Step: "validation", Reason: err.Error()}
}

// decisionID is the id a decision's record is keyed by: its own id, or its
// position in the message.
func decisionID(d *decision.Decision, i int) string {
	if d.ID != "" {
		return d.ID
	}
	return strconv.Itoa(i)
}

// record builds a decided decision's record.
func (w *Worker) record(env *queue.Envelope, i int, r decision.Result) sink.Record {
	if !w.cfg.PublishTiming {
		// Per-run measurements: a redelivery may find a warm prefix cache.
		r.Timing = nil
		if r.Tokens != nil {
			t := *r.Tokens
			t.Evaluated = 0
			r.Tokens = &t
		}
	}
	status := decision.StatusError
	if r.Outcome != nil {
		status = r.Outcome.Status
	}
	rec := sink.Record{
		RequestID: env.RequestID, DecisionID: decisionID(&env.Decisions[i], i), Tenant: env.Tenant,
		Format: env.Format, Model: env.Model, SubmittedAt: env.SubmittedAt.UTC(),
		Status: status, Result: r,
	}
	if status == decision.StatusReview {
		// A results store shows it to a reviewer; sinks never publish it.
		in := env.Decisions[i]
		rec.Input = &in
	}
	for _, t := range env.Reply {
		if t.Kind == "webhook" && t.URL != "" {
			rec.Reply = append(rec.Reply, t.URL)
		}
	}
	return rec
}
