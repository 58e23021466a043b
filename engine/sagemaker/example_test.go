package sagemaker_test

import (
	"context"
	"fmt"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/sagemaker"
)

// Score decisions on a SageMaker endpoint; a local `verdict serve` works as
// a stand-in with EndpointURL.
func ExampleNew() {
	ctx := context.Background()
	s, err := sagemaker.New(ctx, sagemaker.Config{
		EndpointName: "verdict-router",
		EndpointURL:  "http://127.0.0.1:8080", // omit for the regional endpoint
		MaxAttempts:  5,
		MaxElapsed:   30 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	rs, err := s.Score(ctx, []decision.Decision{{
		ID: "t1", State: decision.TextState("Card charged twice."), Question: "Which queue?",
		Options: []decision.Option{{ID: "billing", Description: "Payments."}, {ID: "tech", Description: "Bugs."}},
	}})
	if engine.Retryable(err) {
		fmt.Println("try again later:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rs[0].Chosen)
}
