package decision_test

import (
	"errors"
	"fmt"

	"github.com/verdict-dev/verdict/decision"
)

func ExampleParseSemIf() {
	body := []byte(`{"decision": {
	  "id": "support-route",
	  "state": "Customer asks to reset a forgotten password and says the reset email never arrived.",
	  "question": "Which queue should handle this request?",
	  "options": [
	    {"id": "account_access", "description": "Account access and authentication support."},
	    {"id": "billing", "description": "Billing and payment support."},
	    {"id": "sales", "description": "Sales and product evaluation."}
	  ]
	}}`)
	ds, shape, err := decision.ParseSemIf(body, decision.Limits{})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(shape == decision.ShapeWrapped, len(ds))
	d := ds[0]
	fmt.Println(d.ID, d.OptionIDs())

	// Problems are reported by field path, classed by a sentinel error.
	_, _, err = decision.ParseSemIf([]byte(`{"state": "s", "question": "q?",
	  "options": [{"id": "a", "description": "A"}, {"id": "a", "description": "B"}]}`), decision.Limits{})
	fmt.Println(errors.Is(err, decision.ErrInvalid), err)
	// Output:
	// true 1
	// support-route [account_access billing sales]
	// true options[1].id: duplicate "a" (also options[0])
}

func ExampleParseSystemOne() {
	body := []byte(`{"model": "jev-latest", "state": "Refund request for order 1182.",
	  "questions": {
	    "route": {"type": "choice", "instructions": "Which team?", "criteria": {"refunds": "Refunds team.", "sales": null}},
	    "urgent": {"type": "noul", "instructions": "Is it urgent?"}
	  }}`)
	req, err := decision.ParseSystemOne(body, decision.Limits{})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	for _, d := range req.Decisions() {
		fmt.Println(d.ID, d.OptionIDs())
	}
	// Output:
	// route [refunds sales]
	// urgent [true false]
}
