package router_test

import (
	"fmt"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/router"
)

func ExampleConfig_Choose() {
	cfg := router.Config{CPU: true, GPU: true, GPUTokenThreshold: 2048}
	d := decision.Decision{
		ID: "support-route", State: decision.TextState("Customer cannot reset the password."),
		Question: "Which queue?", Options: []decision.Option{{ID: "account_access"}, {ID: "billing"}},
	}
	fmt.Println(cfg.Choose([]decision.Decision{d}))
	d.Priority = decision.PriorityInteractive
	fmt.Println(cfg.Choose([]decision.Decision{d}))
	// Only a cpu queue: everything goes there.
	fmt.Println(router.Config{CPU: true}.Choose([]decision.Decision{d}))
	// Output:
	// cpu
	// gpu
	// cpu
}

func ExampleGroupKey() {
	a := decision.TextState("same state")
	b := decision.TextState("same state")
	fmt.Println(router.GroupKey(a) == router.GroupKey(b), len(router.GroupKey(a)))
	// Output: true 64
}
