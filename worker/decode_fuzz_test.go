package worker

import (
	"encoding/json"
	"testing"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
)

// FuzzDecodeMessage: any body decodes to a valid envelope or to error
// records that can be published; never a panic, never a message that
// vanishes without an answer.
func FuzzDecodeMessage(f *testing.F) {
	good := queue.Envelope{Version: 1, RequestID: "r", Format: queue.FormatSemIf, Decisions: []decision.Decision{{
		ID: "d", State: decision.TextState("s"), Question: "q?", Options: []decision.Option{{ID: "a"}, {ID: "b"}}}}}
	b, _ := good.Marshal()
	f.Add(b)
	f.Add([]byte(`{"v":1,"request_id":"r","decisions":[{"id":"d","state":{"k":[1,2]},"question":"q","options":[{"id":"a"},{"id":"a"}]}]}`))
	f.Add([]byte(`{"v":2,"request_id":"r","decisions":[]}`))
	f.Add([]byte(`{"v":1,"request_id":"","decisions":null}`))
	f.Add([]byte(`{"v":1,"request_id":"r","decisions":[{"state":"","question":"","options":[]}]}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(``))
	f.Add([]byte(`{"v":1,"request_id":"r","decisions":[{"state":42}]}`))
	esc := good
	esc.Route = decision.RouteGPU
	esc.Cascade = [][]decision.CascadeStage{{{Pool: decision.RouteCPU, Status: decision.StatusEscalate, Probabilities: []float64{0.6, 0.4}, Chosen: "a"}}}
	b, _ = esc.Marshal()
	f.Add(b)
	f.Add([]byte(`{"v":1,"request_id":"r","route":"cpu","decisions":[{"id":"d","state":"s","question":"q","options":[{"id":"a"},{"id":"b"}]}],"cascade":[[{"pool":"cpu","status":"escalate"}],[]]}`))
	f.Add([]byte(`{"v":1,"request_id":"r","route":"gpu","decisions":[{"id":"d","state":"s","question":"q","options":[{"id":"a"},{"id":"b"}]}],"cascade":[[{"pool":"cpu","status":"escalate"},{"pool":"cpu","status":"escalate"}]]}`))
	f.Add([]byte(`{"v":1,"request_id":"r","decisions":[{"id":"d","state":"s","question":"q","options":[{"id":"a"}]}],"cascade":{"pool":1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		env, recs, err := decodeMessage(queue.Message{ID: "m1", Body: body})
		if err == nil {
			if env == nil || env.RequestID == "" || len(env.Decisions) == 0 {
				t.Fatalf("accepted an envelope without request id or decisions: %q", body)
			}
			if len(recs) != 0 {
				t.Fatal("records for a valid message")
			}
			if len(env.Cascade) != 0 && len(env.Cascade) != len(env.Decisions) {
				t.Fatalf("accepted a cascade of %d entries for %d decisions", len(env.Cascade), len(env.Decisions))
			}
			for _, v := range env.Visited() {
				if v == env.Route {
					t.Fatalf("accepted a cascade that visited the message's own pool %s", v)
				}
			}
			return
		}
		if len(recs) == 0 {
			t.Fatalf("invalid message %q got no error record", body)
		}
		for _, r := range recs {
			if r.RequestID == "" || r.DecisionID == "" || r.Status != decision.StatusError || r.Result.Error == nil {
				t.Fatalf("bad error record %+v", r)
			}
			out, err := r.Marshal()
			if err != nil {
				t.Fatalf("error record does not encode: %v", err)
			}
			if !json.Valid(out) {
				t.Fatal("invalid JSON")
			}
		}
	})
}
