package results

import (
	"context"
	"encoding/json"
	"time"
)

// Request statuses: queued while no result is stored, partial while some
// are, done when every decision has its record (error records included).
const (
	StatusQueued  = "queued"
	StatusPartial = "partial"
	StatusDone    = "done"
)

// Decision is one decision in a lookup answer.
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

// Decisions is the answer of GET /v1/decisions/{id}: every decision of
// the caller's with that id (ids are the caller's and may repeat across
// requests), oldest request first.
type Decisions struct {
	ID        string     `json:"id"`
	Decisions []Decision `json:"decisions"`
}

// LookupRequest is the status of request id as tenant's caller sees it;
// found is false for an unknown id and for another tenant's request.
func LookupRequest(ctx context.Context, s Store, tenant, id string) (st Request, found bool, err error) {
	e, err := s.Request(ctx, id)
	if err != nil {
		return Request{}, false, err
	}
	return status(e, tenant, id)
}

// LookupDecision is every decision with id among tenant's requests, or
// only the one in requestID when that is set; found is false when there
// is none.
func LookupDecision(ctx context.Context, s Store, tenant, id, requestID string) (Decisions, bool, error) {
	out := Decisions{ID: id, Decisions: []Decision{}}
	reqIDs := []string{requestID}
	if requestID == "" {
		var err error
		if reqIDs, err = s.RequestsOf(ctx, tenant, id); err != nil {
			return out, false, err
		}
	}
	for _, rid := range reqIDs {
		st, found, err := LookupRequest(ctx, s, tenant, rid)
		if err != nil {
			return out, false, err
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
	return out, len(out.Decisions) > 0, nil
}

// status builds a request's status from what the store holds.
func status(e Entry, tenant, id string) (Request, bool, error) {
	st := Request{RequestID: id, Decisions: []Decision{}}
	if e.Accepted == nil && len(e.Records) == 0 {
		return st, false, nil
	}
	owner := ""
	if e.Accepted != nil {
		owner = e.Accepted.Tenant
	} else {
		owner = e.Records[0].Record.Tenant
	}
	if owner != tenant {
		return st, false, nil // another tenant's request does not exist for this caller
	}
	stored := map[string][]byte{}
	for _, r := range e.Records {
		stored[r.Record.DecisionID] = r.Body
	}
	var ids []string
	if a := e.Accepted; a != nil {
		st.Model = a.Model
		t := a.AcceptedAt.UTC()
		st.AcceptedAt = &t
		for _, d := range a.Decisions {
			ids = append(ids, d.ID)
		}
	} else {
		for _, r := range e.Records {
			ids = append(ids, r.Record.DecisionID)
		}
	}
	for _, d := range ids {
		ds := Decision{RequestID: id, ID: d, Status: StatusQueued}
		if body, ok := stored[d]; ok {
			ds.Status, ds.Record = StatusDone, body
			st.Done++
		}
		st.Decisions = append(st.Decisions, ds)
	}
	st.Total = len(ids)
	switch st.Done {
	case 0:
		st.Status = StatusQueued
	case st.Total:
		st.Status = StatusDone
	default:
		st.Status = StatusPartial
	}
	return st, true, nil
}
