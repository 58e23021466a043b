//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/awstest"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

// Sizes of the AWS results check.
const (
	awsKills    = 5  // kill -9 of a worker writing the results table
	awsRequests = 30 // two decisions each: 60 decisions
)

// TestKillAWSWorkerLosesNothing protects the AWS shape's results by id:
// requests go through the real bootstrap under the Lambda emulator into
// moto's SQS, and workers writing the DynamoDB results table (and a
// results queue) are killed -9 again and again while they score. Every
// accepted decision ends done in GET /v1/requests/{id}, with one record
// that every copy published to the results queue agrees with.
func TestKillAWSWorkerLosesNothing(t *testing.T) {
	r := seeded(t)
	rie := awstest.FindRIE(t)
	ctx := context.Background()
	moto, err := queuetest.StartMoto()
	require.NoError(t, err)
	defer moto.Stop()
	work, err := moto.CreateQueue(ctx, "chaos-aws-work", queuetest.QueueOptions{MaxReceives: 10})
	require.NoError(t, err)
	resultsQ, err := moto.CreateQueue(ctx, "chaos-aws-results", queuetest.QueueOptions{})
	require.NoError(t, err)
	ddb := dynamodb.NewFromConfig(moto.AWS(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	require.NoError(t, results.CreateTable(ctx, ddb, "chaos-results"))
	endpoint := "AWS_ENDPOINT_URL=" + moto.Endpoint
	front := awstest.StartFrontDoor(t, rie, awstest.BuildBootstrap(t, "../..", t.TempDir()), append([]string{endpoint,
		"VERDICT_CPU_QUEUE_URL=" + work.URL, "VERDICT_RESULTS_TABLE=chaos-results", "VERDICT_API_KEYS=chaos-key-0123456789=acme"}, awsEnv...)...)
	call := func(method, path, body string) (int, []byte) {
		ev := events.APIGatewayV2HTTPRequest{RawPath: path, Body: body,
			Headers: map[string]string{"content-type": "application/json", "x-api-key": "chaos-key-0123456789"}}
		ev.RequestContext.HTTP.Method = method
		out := front.Invoke(t, ev)
		return out.StatusCode, []byte(out.Body)
	}
	submit := func(i int) string {
		status, body := call("POST", "/v1/decisions", semifBatch("aws", i, 3*stateReps))
		require.Equal(t, http.StatusAccepted, status, "%s", body)
		var acc struct {
			RequestID string `json:"request_id"`
		}
		require.NoError(t, json.Unmarshal(body, &acc))
		return acc.RequestID
	}
	worker := func() *proc {
		return start(t, append([]string{endpoint}, awsEnv...), "worker", "--queue", "sqs", "--queue-url", work.URL,
			"--results-table", "chaos-results", "--results-queue-url", resultsQ.URL, "--results-store", "none",
			"--model", tinyModel, "--threads", "2", "--wait", "1s", "--visibility", "3s", "--log-format", "json")
	}
	done := func(ids []string) (int, map[string]sink.Record) {
		n, recs := 0, map[string]sink.Record{}
		for _, id := range ids {
			status, body := call("GET", "/v1/requests/"+id, "")
			require.Equal(t, http.StatusOK, status, "%s", body)
			var st results.Request
			require.NoError(t, json.Unmarshal(body, &st))
			for _, d := range st.Decisions {
				if d.Status == results.StatusDone {
					var rec sink.Record
					require.NoError(t, json.Unmarshal(d.Record, &rec))
					recs[rec.Key()] = rec
					n++
				}
			}
		}
		return n, recs
	}

	// Requests come in waves, one before each start, so that every kill
	// finds work in flight.
	var ids []string
	wave := (awsRequests + awsKills - 1) / awsKills
	for k := range awsKills {
		for i := k * wave; i < min((k+1)*wave, awsRequests); i++ {
			ids = append(ids, submit(i))
		}
		p := worker()
		p.waitLog(t, msgWorkerStarted, startTimeout)
		time.Sleep(between(r, 200*time.Millisecond, 1500*time.Millisecond))
		p.kill()
		n, _ := done(ids)
		t.Logf("kill %d of the worker; %d of %d decisions accepted are done", k+1, n, 2*len(ids))
	}
	p := worker()
	var stored map[string]sink.Record
	eventually(t, killSettleLimit, 0, func() bool {
		var n int
		n, stored = done(ids)
		return n == 2*len(ids)
	}, "every accepted decision is done in the results table")
	_, err = p.terminate(t, time.Minute)
	require.NoError(t, err)

	published, copies := map[string]sink.Record{}, map[string]int{}
	sqsResults(t, ctx, newSQS(t, ctx, moto, resultsQ.URL), published, copies)
	extra := 0
	for key, rec := range stored {
		requireDecided(t, rec)
		pub, ok := published[key]
		require.True(t, ok, "%s is in the table but was never published", key)
		require.True(t, sameResult(rec, pub), "the table and the results queue disagree on %s:\n%s\n%s", key, mustJSON(rec), mustJSON(pub))
		extra += copies[key] - 1
	}
	require.Len(t, stored, 2*len(ids))
	t.Logf("%d decisions done, each with one record; %d redelivered copies agreed with it", len(stored), extra)
}
