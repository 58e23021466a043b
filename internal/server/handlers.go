package server

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

// Formats, as logged and counted.
const (
	formatSemIf     = "semif"
	formatSystemOne = "systemone"
)

// handleInvocations serves /invocations and /endpoints/{name}/invocations:
// a SemIf body (bare, wrapped or batch) or a System One body, answered in
// the same format.
func (s *Server) handleInvocations(w http.ResponseWriter, r *http.Request, rs *reqState) {
	s.admitBody(w, r, rs, func(ctx context.Context, st *readyState, body []byte) {
		s.serveInvocations(ctx, w, rs, st, body)
	})
}

// admitBody is the start every scoring route shares: the per-request
// timeout, admission (released when serve returns) and the body read
// within its limit; serve runs only when all three succeeded.
func (s *Server) admitBody(w http.ResponseWriter, r *http.Request, rs *reqState, serve func(ctx context.Context, st *readyState, body []byte)) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	st, leave, ok := s.admit(w, rs)
	if !ok {
		return
	}
	defer leave()
	body, e := s.readBody(w, r)
	if e != nil {
		s.writeError(w, rs, e)
		return
	}
	if s.cfg.LogState {
		rs.body = body
	}
	serve(ctx, st, body)
}

func (s *Server) serveInvocations(ctx context.Context, w http.ResponseWriter, rs *reqState, st *readyState, body []byte) {
	if decision.LooksLikeSystemOne(body) {
		s.serveSystemOne(ctx, w, rs, st, body)
		return
	}
	rs.format = formatSemIf
	ds, shape, err := decision.ParseSemIf(body, s.cfg.Limits)
	if err != nil {
		s.writeError(w, rs, semifParseError(err, body, s.cfg.Limits.WithDefaults().MaxDecisions))
		return
	}
	rs.decisions = len(ds)
	start := time.Now()
	results, e := s.score(ctx, st, ds, policy.Caller{Tenant: rs.tenant, APIKey: rs.apiKey})
	if e != nil {
		s.writeError(w, rs, e)
		return
	}
	s.metrics.decisions.WithLabelValues(formatSemIf).Add(float64(len(results)))
	var out []byte
	var err2 error
	if shape == decision.ShapeBatch {
		out, err2 = json.Marshal(struct {
			Results []decision.Result `json:"results"`
			Timing  batchTiming       `json:"timing"`
		}{results, newBatchTiming(ds, results, time.Since(start).Seconds())})
	} else {
		out, err2 = json.Marshal(struct {
			Result decision.Result `json:"result"`
		}{results[0]})
	}
	if err2 != nil {
		s.writeError(w, rs, newAPIError(decision.CodeInternal, "encoding the result: %v", err2))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// handleSystemOne serves /v1/systemone: System One bodies only.
func (s *Server) handleSystemOne(w http.ResponseWriter, r *http.Request, rs *reqState) {
	s.admitBody(w, r, rs, func(ctx context.Context, st *readyState, body []byte) {
		s.serveSystemOne(ctx, w, rs, st, body)
	})
}

func (s *Server) serveSystemOne(ctx context.Context, w http.ResponseWriter, rs *reqState, st *readyState, body []byte) {
	rs.format = formatSystemOne
	req, err := decision.ParseSystemOne(body, s.cfg.Limits)
	if err != nil {
		s.writeError(w, rs, parseError(err))
		return
	}
	if !s.modelAccepted(st, req.Model) {
		s.writeError(w, rs, newAPIError(decision.CodeModelNotFound, "model %q is not served here (this server answers with %q; accepted aliases: %s)",
			req.Model, st.name, strings.Join(s.cfg.Aliases, ", ")))
		return
	}
	ds := req.Decisions()
	rs.decisions = len(ds)
	results, e := s.score(ctx, st, ds, policy.Caller{Tenant: rs.tenant, APIKey: rs.apiKey})
	if e != nil {
		s.writeError(w, rs, e)
		return
	}
	answers := make([][]byte, len(req.Questions))
	var usage decision.SystemOneUsage
	for i, q := range req.Questions {
		r := results[i]
		if e := systemOneReady(q, &r); e != nil {
			s.writeError(w, rs, e)
			return
		}
		a, err := decision.SystemOneAnswer(q, &r)
		if err != nil {
			s.writeError(w, rs, newAPIError(decision.CodeInternal, "question %q: encoding the answer: %v", q.Key, err))
			return
		}
		answers[i] = a
		if r.Tokens != nil {
			usage.InputTokens += r.Tokens.Input
		}
	}
	s.metrics.decisions.WithLabelValues(formatSystemOne).Add(float64(len(results)))
	writeJSON(w, http.StatusOK, decision.SystemOneResponse(st.name, req.Questions, answers, usage))
}

// systemOneReady checks that a result can be rendered as a System One
// answer, which has no per-answer error: a failed question fails the
// request. A result settled by a policy rule without scores is rendered
// with all probability on the rule's option.
func systemOneReady(q decision.SystemOneQuestion, r *decision.Result) *apiError {
	if r.Error != nil {
		return resultError(q.Key, r.Error)
	}
	if len(r.Probabilities) == 0 {
		o := r.Outcome
		switch {
		case o != nil && o.Status == decision.StatusRefused:
			return newAPIError(decision.CodeForbidden, "question %q: %s", q.Key, o.Reason)
		case o != nil && o.Chosen != "" && slices.Contains(r.OptionIDs, o.Chosen):
			r.Probabilities = make([]float64, len(r.OptionIDs))
			r.Probabilities[slices.Index(r.OptionIDs, o.Chosen)] = 1
			r.Chosen = o.Chosen
		default:
			return newAPIError(decision.CodeEngine, "question %q: no scores and no settled option", q.Key)
		}
	}
	if len(r.Probabilities) != len(r.OptionIDs) {
		return newAPIError(decision.CodeEngine, "question %q: %d probabilities for %d options", q.Key, len(r.Probabilities), len(r.OptionIDs))
	}
	if r.Chosen == "" {
		best := 0
		for i, p := range r.Probabilities {
			if p > r.Probabilities[best] {
				best = i
			}
		}
		r.Chosen = r.OptionIDs[best]
	}
	return nil
}

// modelAccepted reports whether a System One "model" names this server's
// model: empty, its name, file, sha256, or an accepted alias.
func (s *Server) modelAccepted(st *readyState, name string) bool {
	if name == "" || name == st.name || slices.Contains(s.cfg.Aliases, name) {
		return true
	}
	m := st.model
	if m.File != "" {
		base := filepath.Base(m.File)
		if name == m.File || name == base || name == strings.TrimSuffix(base, ".gguf") {
			return true
		}
	}
	return (m.Name != "" && name == m.Name) || (m.SHA256 != "" && name == m.SHA256)
}

// modelCard is one entry of GET /v1/models, in the hosted service's shape
// (name, description, release_date), plus verdict's own members, which
// clients ignore.
type modelCard struct {
	Name        string                  `json:"name"`
	Description string                  `json:"description"`
	ReleaseDate string                  `json:"release_date"`
	AliasFor    string                  `json:"alias_for,omitempty"`
	Ready       *bool                   `json:"ready,omitempty"`
	Verdict     *decision.ModelIdentity `json:"verdict,omitempty"`
}

// handleModels lists the model that answers, then each accepted alias:
// {"models": [{"name", "description", "release_date"}, …]}.
func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request, _ *reqState) {
	st := s.ready.Load()
	ready := st != nil
	name, id := s.cfg.modelName(s.cfg.Model), s.cfg.Model
	if ready {
		name, id = st.name, st.model
	}
	release := s.cfg.ReleaseDate
	desc := "verdict: logit readout of a local GGUF model"
	if id.File != "" {
		desc += " (" + filepath.Base(id.File) + ")"
	}
	models := []modelCard{{Name: name, Description: desc, ReleaseDate: release, Ready: &ready, Verdict: &id}}
	for _, a := range s.cfg.Aliases {
		models = append(models, modelCard{Name: a, Description: "alias of " + name + " on this server", ReleaseDate: release, AliasFor: name})
	}
	b, _ := json.Marshal(struct {
		Models []modelCard `json:"models"`
	}{models})
	writeJSON(w, http.StatusOK, b)
}
