package lambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/lambda"
	"github.com/verdict-dev/verdict/router"
)

// A front door over the embedded local queue: a System One request is
// accepted with 202, and its questions travel as one message because they
// share the state.
func ExampleHandler_Handle() {
	dir, _ := os.MkdirTemp("", "frontdoor-example-")
	defer os.RemoveAll(dir)
	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(dir, "queue.db"), Name: "cpu"})
	if err != nil {
		panic(err)
	}
	defer q.Close()

	h, err := lambda.New(lambda.Config{
		Queues:          map[decision.Route]queue.Sender{decision.RouteCPU: q},
		Router:          router.Config{CPU: true},
		APIKeys:         map[string]string{"example-key-123": "acme"},
		ResultsLocation: "/v1/requests/{request_id}",
	})
	if err != nil {
		panic(err)
	}
	resp := h.Handle(context.Background(), &lambda.Request{
		Method: "POST",
		Path:   lambda.PathSystemOneAsync,
		Header: http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer example-key-123"}},
		Body: []byte(`{"model": "jev-latest", "state": "I was charged twice for March.",
			"questions": {"refund": {"type": "noul", "instructions": "Does the customer want money back?"},
			              "topic": {"type": "choice", "instructions": "Topic?", "criteria": {"billing": null, "technical": null}}}}`),
	})
	var acc lambda.Accepted
	_ = json.Unmarshal(resp.Body, &acc)
	fmt.Println(resp.Status, acc.Route, acc.DecisionIDs, acc.Messages)

	msgs, _ := q.Receive(context.Background(), queue.ReceiveOptions{Max: 10})
	env, _ := queue.UnmarshalEnvelope(msgs[0].Body)
	fmt.Println(env.Tenant, env.Format, len(env.Decisions), env.Decisions[1].OptionIDs())
	// Output:
	// 202 cpu [refund topic] 1
	// acme systemone 2 [billing technical]
}
