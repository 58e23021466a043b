package results_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

// stores runs fn against each implementation: the local SQLite files and
// a DynamoDB table on moto_server.
func stores(t *testing.T, fn func(t *testing.T, s results.Store)) {
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		s, err := results.OpenLocal(t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		fn(t, s)
	})
	t.Run("dynamodb", func(t *testing.T) {
		t.Parallel()
		fn(t, newDynamo(t))
	})
}

var tables atomic.Int64

func dynamoClient(t *testing.T) *dynamodb.Client {
	m := queuetest.SharedMoto(t)
	return dynamodb.NewFromConfig(m.AWS(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(m.Endpoint) })
}

func newDynamo(t *testing.T) *results.Dynamo {
	c := dynamoClient(t)
	name := fmt.Sprintf("results-%d", tables.Add(1))
	require.NoError(t, results.CreateTable(context.Background(), c, name))
	s, err := results.NewDynamo(results.DynamoConfig{Table: name, Client: c})
	require.NoError(t, err)
	require.NoError(t, s.Check(context.Background()))
	return s
}

func record(req, dec, tenant string, st decision.Status, chosen string) sink.Record {
	return sink.Record{RequestID: req, DecisionID: dec, Tenant: tenant, Format: "semif",
		SubmittedAt: time.Unix(1700000000, 0).UTC(), Status: st,
		Result: decision.Result{ID: dec, OptionIDs: []string{"a", "b"}, Probabilities: []float64{0.75, 0.25}, Chosen: chosen}}
}

func accepted(req, tenant string, ids ...string) results.Accepted {
	a := results.Accepted{RequestID: req, Tenant: tenant, Model: "m", AcceptedAt: time.Unix(1700000000, 0).UTC()}
	for _, id := range ids {
		a.Decisions = append(a.Decisions, results.AcceptedDecision{ID: id, Route: "cpu"})
	}
	return a
}

// A request goes queued → partial → done; an error record counts as done;
// the decisions keep request order; another tenant sees nothing.
func TestLookupFollowsARequest(t *testing.T) {
	stores(t, func(t *testing.T, s results.Store) {
		ctx := context.Background()
		_, found, err := results.LookupRequest(ctx, s, "acme", "req_1")
		require.NoError(t, err)
		require.False(t, found, "unknown")

		require.NoError(t, s.Accept(ctx, accepted("req_1", "acme", "z", "a", "m")))
		require.NoError(t, s.Accept(ctx, accepted("req_1", "acme", "z", "a", "m")), "recording again changes nothing")
		st, found, err := results.LookupRequest(ctx, s, "acme", "req_1")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, results.StatusQueued, st.Status)
		require.Equal(t, []string{"z", "a", "m"}, ids(st.Decisions))
		require.Equal(t, 0, st.Done)
		require.Equal(t, 3, st.Total)
		require.Equal(t, "m", st.Model)
		require.Equal(t, time.Unix(1700000000, 0).UTC(), *st.AcceptedAt)

		require.NoError(t, s.Publish(ctx, []sink.Record{record("req_1", "a", "acme", decision.StatusDecided, "a")}))
		st, _, err = results.LookupRequest(ctx, s, "acme", "req_1")
		require.NoError(t, err)
		require.Equal(t, results.StatusPartial, st.Status)
		require.Equal(t, "done", st.Decisions[1].Status)
		require.Equal(t, "queued", st.Decisions[0].Status)

		require.NoError(t, s.Publish(ctx, []sink.Record{record("req_1", "z", "acme", decision.StatusDecided, "b"),
			record("req_1", "m", "acme", decision.StatusError, "")}))
		st, _, err = results.LookupRequest(ctx, s, "acme", "req_1")
		require.NoError(t, err)
		require.Equal(t, results.StatusDone, st.Status)
		require.Equal(t, 3, st.Done)
		var rec sink.Record
		require.NoError(t, json.Unmarshal(st.Decisions[2].Record, &rec))
		require.Equal(t, decision.StatusError, rec.Status)

		_, found, err = results.LookupRequest(ctx, s, "other", "req_1")
		require.NoError(t, err)
		require.False(t, found, "another tenant's request does not exist for this caller")
		_, found, err = results.LookupDecision(ctx, s, "other", "a", "")
		require.NoError(t, err)
		require.False(t, found)
		_, found, err = results.LookupDecision(ctx, s, "other", "a", "req_1")
		require.NoError(t, err)
		require.False(t, found)
	})
}

// A redelivered message stores the same record again, and a different
// one never replaces the first.
func TestFirstCopyIsKept(t *testing.T) {
	stores(t, func(t *testing.T, s results.Store) {
		ctx := context.Background()
		first := record("req_2", "d", "", decision.StatusDecided, "a")
		require.NoError(t, s.Publish(ctx, []sink.Record{first}))
		require.NoError(t, s.Publish(ctx, []sink.Record{first}))
		require.NoError(t, s.Publish(ctx, []sink.Record{record("req_2", "d", "", decision.StatusDecided, "b")}))
		e, err := s.Request(ctx, "req_2")
		require.NoError(t, err)
		require.Nil(t, e.Accepted, "never accepted through this store")
		require.Len(t, e.Records, 1)
		require.Equal(t, "a", e.Records[0].Record.Result.Chosen)
		want, err := first.Marshal()
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(e.Records[0].Body))

		// Known only by its record, the request is still found, done.
		st, found, err := results.LookupRequest(ctx, s, "", "req_2")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, results.StatusDone, st.Status)
	})
}

// Decision ids are the caller's and repeat across requests: a lookup by
// id finds the tenant's requests that hold it, queued or done, oldest
// first, and only the tenant's.
func TestLookupDecisionAcrossRequests(t *testing.T) {
	stores(t, func(t *testing.T, s results.Store) {
		ctx := context.Background()
		a1 := accepted("req_a", "acme", "ticket-1", "x")
		a2 := accepted("req_b", "acme", "ticket-1")
		a2.AcceptedAt = a1.AcceptedAt.Add(time.Second)
		require.NoError(t, s.Accept(ctx, a1))
		require.NoError(t, s.Accept(ctx, a2))
		require.NoError(t, s.Accept(ctx, accepted("req_c", "globex", "ticket-1")))
		require.NoError(t, s.Publish(ctx, []sink.Record{record("req_a", "ticket-1", "acme", decision.StatusDecided, "a")}))

		got, found, err := results.LookupDecision(ctx, s, "acme", "ticket-1", "")
		require.NoError(t, err)
		require.True(t, found)
		require.Len(t, got.Decisions, 2)
		require.Equal(t, "req_a", got.Decisions[0].RequestID)
		require.Equal(t, "done", got.Decisions[0].Status)
		require.Equal(t, "req_b", got.Decisions[1].RequestID)
		require.Equal(t, "queued", got.Decisions[1].Status)

		got, found, err = results.LookupDecision(ctx, s, "acme", "ticket-1", "req_b")
		require.NoError(t, err)
		require.True(t, found)
		require.Len(t, got.Decisions, 1)

		_, found, err = results.LookupDecision(ctx, s, "acme", "nope", "")
		require.NoError(t, err)
		require.False(t, found)
	})
}

func ids(ds []results.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// The largest record the field limits allow (255 options, each id at the
// longest and all of it escaped in JSON) is stored whole in one DynamoDB
// item and read back byte for byte.
func TestLargestRecordFitsOneItem(t *testing.T) {
	t.Parallel()
	l := decision.DefaultLimits()
	r := record(strings.Repeat("r", 256), strings.Repeat("\u2028", l.MaxIDBytes/3), "t", decision.StatusDecided, "")
	r.Result.OptionIDs, r.Result.Probabilities, r.Result.OptionLogits, r.Result.Labels = nil, nil, nil, nil
	for i := range l.MaxOptions {
		id := fmt.Sprintf("%03d", i) + strings.Repeat("<", l.MaxOptionIDBytes-3) // '<' is escaped as \u003c
		r.Result.OptionIDs = append(r.Result.OptionIDs, id)
		r.Result.Probabilities = append(r.Result.Probabilities, 1/float64(l.MaxOptions)+1e-17*float64(i))
		r.Result.OptionLogits = append(r.Result.OptionLogits, -1.2345678901234567e-10*float64(i))
		r.Result.Labels = append(r.Result.Labels, id)
	}
	r.Result.Chosen = r.Result.OptionIDs[254]
	body, err := r.Marshal()
	require.NoError(t, err)
	t.Logf("largest record: %d bytes of JSON", len(body))
	// With its keys and attributes the item would pass DynamoDB's 400 KB
	// uncompressed: the test means something only while that holds.
	require.Greater(t, len(body), 380<<10)

	s := newDynamo(t)
	ctx := context.Background()
	require.NoError(t, s.Publish(ctx, []sink.Record{r}))
	e, err := s.Request(ctx, r.RequestID)
	require.NoError(t, err)
	require.Len(t, e.Records, 1)
	require.Equal(t, body, e.Records[0].Body, "stored whole, never cut")
}

// A missing table stops a worker at its start with one line naming the
// table and the action.
func TestCheckNamesAMissingTable(t *testing.T) {
	t.Parallel()
	s, err := results.NewDynamo(results.DynamoConfig{Table: "no-such-table", Client: dynamoClient(t)})
	require.NoError(t, err)
	err = s.Check(context.Background())
	require.ErrorIs(t, err, results.ErrUnavailable)
	require.Contains(t, err.Error(), "results table no-such-table does not exist (dynamodb:DescribeTable)")
	_, err = s.Request(context.Background(), "req_1")
	require.ErrorIs(t, err, results.ErrUnavailable)
}
