// Command bootstrap is verdict's front door as an AWS Lambda function (the
// provided.al2023 runtime runs a file named bootstrap). It validates decision
// requests from API Gateway HTTP API (payload 2.0) or a Function URL and
// enqueues them to the cpu or gpu SQS queue; workers score them.
//
// Build it without cgo:
//
//	CGO_ENABLED=0 go build -tags lambda.norpc -o bin/bootstrap ./cmd/bootstrap
//
// Configuration comes from the environment (see lambda.LoadEnv and
// docs/frontdoor.md): VERDICT_CPU_QUEUE_URL, VERDICT_GPU_QUEUE_URL,
// VERDICT_API_KEYS, VERDICT_POLICY, VERDICT_RESULTS_TABLE, …. Every AWS
// client honours the SDK's AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE>
// (moto, LocalStack); VERDICT_SQS_ENDPOINT stays as an alias for SQS.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/lambda"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/router"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	h, err := setup(context.Background(), log)
	if err != nil {
		// An init failure: Lambda reports it and retries the cold start.
		log.Error("front door: configuration", "err", err)
		fmt.Fprintln(os.Stderr, "bootstrap:", err)
		os.Exit(1)
	}
	awslambda.Start(h.HandleHTTPAPI)
}

// setup builds the handler from the environment.
func setup(ctx context.Context, log *slog.Logger) (*lambda.Handler, error) {
	env, err := lambda.LoadEnv(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	ac, err := queue.LoadAWS(ctx, "")
	if err != nil {
		return nil, err
	}
	queues := map[decision.Route]queue.Sender{}
	for route, url := range map[decision.Route]string{decision.RouteCPU: env.CPUQueueURL, decision.RouteGPU: env.GPUQueueURL} {
		if url == "" {
			continue
		}
		q, err := queue.NewSQS(ctx, queue.SQSConfig{URL: url, Endpoint: env.SQSEndpoint, AWS: &ac})
		if err != nil {
			return nil, err
		}
		queues[route] = q
	}
	holder, err := policy.NewHolder(env.PolicyFile)
	if err != nil {
		return nil, fmt.Errorf("VERDICT_POLICY: %w", err)
	}
	// No request at the start: a missing table or permission is answered
	// 503 with Retry-After per request, and logged, not a failed start.
	var store results.Store
	if env.ResultsTable != "" {
		if store, err = results.NewDynamo(results.DynamoConfig{Table: env.ResultsTable, Client: dynamodb.NewFromConfig(ac), TTL: env.ResultsTTL}); err != nil {
			return nil, fmt.Errorf("VERDICT_RESULTS_TABLE: %w", err)
		}
	}
	feedbackSinks, err := feedbackSinks(env, ac)
	if err != nil {
		return nil, err
	}
	return lambda.New(lambda.Config{
		Results:         store,
		FeedbackSinks:   feedbackSinks,
		Queues:          queues,
		Router:          router.Config{GPUTokenThreshold: env.GPUTokenThreshold, CPU: env.CPUQueueURL != "", GPU: env.GPUQueueURL != ""},
		AuthorizeFunc:   lambda.PolicyAuthorizer(holder.Current),
		APIKeys:         env.APIKeys,
		AllowAnonymous:  env.AllowAnonymous,
		TrustAuthorizer: env.TrustAuthorizer,
		MaxBodyBytes:    env.MaxBodyBytes,
		RetryAfter:      env.RetryAfter,
		ResultsLocation: env.ResultsLocation,
		Logger:          log,
	})
}

// feedbackSinks are the workers' sinks, from the same variables: feedback
// answers are published where results are.
func feedbackSinks(env lambda.Env, ac aws.Config) ([]sink.EventSink, error) {
	var out []sink.EventSink
	if env.ResultsQueueURL != "" {
		s, err := sink.NewSQS(queue.NewSQSClient(ac, env.SQSEndpoint), env.ResultsQueueURL)
		if err != nil {
			return nil, fmt.Errorf("VERDICT_RESULTS_QUEUE_URL: %w", err)
		}
		out = append(out, s)
	}
	if env.SNSTopicARN != "" {
		s, err := sink.NewSNS(sink.NewSNSClient(ac, env.SQSEndpoint), env.SNSTopicARN)
		if err != nil {
			return nil, fmt.Errorf("VERDICT_SNS_TOPIC_ARN: %w", err)
		}
		out = append(out, s)
	}
	if env.WebhookURL != "" {
		s, err := sink.NewWebhook(sink.WebhookConfig{URL: env.WebhookURL, Secret: []byte(env.WebhookSecret)})
		if err != nil {
			return nil, fmt.Errorf("VERDICT_WEBHOOK_URL: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}
