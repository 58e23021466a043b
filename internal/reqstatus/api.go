package reqstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/auth"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/lambda"
)

// API serves the result lookups of `verdict up`.
type API struct {
	front *lambda.Handler
	store *sink.Store
	log   *Log
}

// NewAPI returns the lookups over the results store and the request log,
// authenticating callers through the front door.
func NewAPI(front *lambda.Handler, store *sink.Store, log *Log) *API {
	return &API{front: front, store: store, log: log}
}

// Decision is one decision in a status answer.
type Decision struct {
	RequestID string `json:"request_id"`
	ID        string `json:"id"`
	// Status is "queued" or "done".
	Status string `json:"status"`
	// Record is the published result record once done.
	Record json.RawMessage `json:"record,omitempty"`
}

// Request is the answer of GET /v1/requests/{id}.
type Request struct {
	RequestID  string     `json:"request_id"`
	Status     string     `json:"status"`
	Model      string     `json:"model,omitempty"`
	AcceptedAt *time.Time `json:"accepted_at,omitempty"`
	Done       int        `json:"done"`
	Total      int        `json:"total"`
	Decisions  []Decision `json:"decisions"`
}

// caller authenticates a lookup like a submission; with API keys set, a
// caller sees only its tenant's requests.
func (a *API) caller(rw http.ResponseWriter, r *http.Request) (lambda.Caller, bool) {
	c, resp := a.front.Authenticate(&lambda.Request{Method: r.Method, Path: r.URL.Path, Header: r.Header})
	if resp != nil {
		resp.Write(rw)
		return c, false
	}
	return c, true
}

// InternalError answers 500 in the front door's shape and logs the cause.
func InternalError(rw http.ResponseWriter, what string, err error) {
	slog.Error("verdict up: "+what, "err", err)
	lambda.ErrorResponse(lambda.ErrorBody{Code: decision.CodeInternal, Message: "internal error"}).Write(rw)
}

func notFound(rw http.ResponseWriter, msg string) {
	lambda.ErrorResponse(lambda.ErrorBody{Code: decision.CodeNotFound, Message: msg}).Write(rw)
}

// status builds the status of one request, or found=false.
func (a *API) status(ctx context.Context, c lambda.Caller, id string) (Request, bool, error) {
	st := Request{RequestID: id, Decisions: []Decision{}}
	logged, known, err := a.log.get(ctx, id)
	if err != nil {
		return st, false, err
	}
	stored, err := a.store.ByRequest(ctx, id)
	if err != nil {
		return st, false, err
	}
	if !known && len(stored) == 0 {
		return st, false, nil
	}
	tenant := logged.tenant
	if !known {
		tenant = stored[0].Record.Tenant
	}
	if tenant != c.Tenant {
		return st, false, nil // another tenant's request does not exist for this caller
	}
	byID := map[string]sink.Stored{}
	for _, s := range stored {
		byID[s.Record.DecisionID] = s
	}
	ids := logged.decisions
	if !known {
		for _, s := range stored {
			ids = append(ids, s.Record.DecisionID)
		}
	}
	st.Model = logged.model
	if known {
		t := logged.acceptedAt
		st.AcceptedAt = &t
	}
	for _, d := range ids {
		ds := Decision{RequestID: id, ID: d, Status: "queued"}
		if s, ok := byID[d]; ok {
			ds.Status, ds.Record = "done", s.Body
			st.Done++
		}
		st.Decisions = append(st.Decisions, ds)
	}
	st.Total = len(ids)
	st.Status = "queued"
	if st.Done == st.Total {
		st.Status = "done"
	}
	return st, true, nil
}

// getRequest serves GET /v1/requests/{id}.
func (a *API) getRequest(rw http.ResponseWriter, r *http.Request) {
	c, ok := a.caller(rw, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	st, found, err := a.status(r.Context(), c, id)
	switch {
	case err != nil:
		InternalError(rw, "request status", err)
	case !found:
		notFound(rw, fmt.Sprintf("no request %q", id))
	default:
		lambda.JSONResponse(http.StatusOK, st).Write(rw)
	}
}

// getDecision serves GET /v1/decisions/{id}: every decision with that id
// (ids are the caller's and may repeat across requests), or one with
// ?request_id=.
func (a *API) getDecision(rw http.ResponseWriter, r *http.Request) {
	c, ok := a.caller(rw, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	reqIDs := []string{r.URL.Query().Get("request_id")}
	if reqIDs[0] == "" {
		var err error
		if reqIDs, err = a.log.requestsOf(r.Context(), id); err != nil {
			InternalError(rw, "decision status", err)
			return
		}
		stored, err := a.store.ByDecision(r.Context(), id)
		if err != nil {
			InternalError(rw, "decision status", err)
			return
		}
		seen := map[string]bool{}
		for _, rid := range reqIDs {
			seen[rid] = true
		}
		for _, s := range stored {
			if !seen[s.Record.RequestID] {
				seen[s.Record.RequestID] = true
				reqIDs = append(reqIDs, s.Record.RequestID)
			}
		}
	}
	out := struct {
		ID        string     `json:"id"`
		Decisions []Decision `json:"decisions"`
	}{ID: id, Decisions: []Decision{}}
	for _, rid := range reqIDs {
		st, found, err := a.status(r.Context(), c, rid)
		if err != nil {
			InternalError(rw, "decision status", err)
			return
		}
		if !found {
			continue
		}
		for _, d := range st.Decisions {
			if d.ID == id {
				out.Decisions = append(out.Decisions, d)
			}
		}
	}
	if len(out.Decisions) == 0 {
		notFound(rw, fmt.Sprintf("no decision %q", id))
		return
	}
	lambda.JSONResponse(http.StatusOK, out).Write(rw)
}

// Routes is the HTTP surface of `verdict up`. Every route but the health
// check (auth.Open) authenticates its caller through the front door, by the
// rules of package auth, and answers a refusal in the front door's shape.
func Routes(api *API, metrics, policyAdmin, pools http.Handler) *http.ServeMux {
	front := api.front
	mux := http.NewServeMux()
	mux.Handle("POST "+lambda.PathDecisions, front)
	mux.Handle("POST "+lambda.PathSystemOneAsync, front)
	mux.HandleFunc("GET /v1/requests/{id}", api.getRequest)
	mux.HandleFunc("GET /v1/decisions/{id}", api.getDecision)
	mux.Handle("GET /metrics", guarded(front, metrics))
	mux.Handle("GET /v1/status", guarded(front, pools))
	mux.Handle("/admin/policy", guarded(front, policyAdmin))
	mux.Handle("GET /healthz", guarded(front, http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		lambda.JSONResponse(http.StatusOK, map[string]string{"status": "ok"}).Write(rw)
	})))
	mux.Handle("/", front) // 404 and 405 answers in the front door's shape
	return mux
}

// guarded serves next to the callers the front door accepts, and to anyone
// on the routes auth.Open names; others get the front door's 401.
func guarded(front *lambda.Handler, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth.Open(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if _, resp := front.Authenticate(&lambda.Request{Method: r.Method, Path: r.URL.Path, Header: r.Header}); resp != nil {
			resp.Write(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}
