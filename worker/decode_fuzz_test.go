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
	f.Fuzz(func(t *testing.T, body []byte) {
		env, recs, err := decodeMessage(queue.Message{ID: "m1", Body: body})
		if err == nil {
			if env == nil || env.RequestID == "" || len(env.Decisions) == 0 {
				t.Fatalf("accepted an envelope without request id or decisions: %q", body)
			}
			if len(recs) != 0 {
				t.Fatal("records for a valid message")
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
