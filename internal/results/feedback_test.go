package results_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

func reviewRecord(req, dec, tenant string) sink.Record {
	r := record(req, dec, tenant, decision.StatusReview, "")
	r.Input = &decision.Decision{ID: dec, State: decision.State{Text: "<script>alert(1)</script> state of " + dec}, Question: "Which?",
		Options: []decision.Option{{ID: "a", Description: "A."}, {ID: "b", Description: "B."}}}
	return r
}

// Reviews open when a review outcome is stored, page oldest first, and
// close when answered; answers supersede each other and keep their
// history; a replay records nothing; every wrong call is a clear error.
func TestFeedbackAndReviews(t *testing.T) {
	stores(t, func(t *testing.T, s results.Store) {
		ctx := context.Background()
		clock := time.Unix(1700000000, 0)
		results.SetClock(s, func() time.Time { return clock })
		require.NoError(t, s.Accept(ctx, accepted("req_f", "acme", "d1", "d2", "d3", "d4")))
		for _, r := range []sink.Record{reviewRecord("req_f", "d1", "acme"), reviewRecord("req_f", "d2", "acme"),
			record("req_f", "d3", "acme", decision.StatusDecided, "a")} {
			require.NoError(t, s.Publish(ctx, []sink.Record{r}))
			clock = clock.Add(time.Second) // the inbox's order is the store's
		}
		require.NoError(t, s.Publish(ctx, []sink.Record{reviewRecord("req_g", "d1", "globex")}))

		page, next, err := s.Reviews(ctx, "acme", "", 1)
		require.NoError(t, err)
		require.Len(t, page, 1)
		require.Equal(t, "d1", page[0].Input.ID)
		require.Contains(t, page[0].Input.State.Text, "<script>")
		require.Equal(t, decision.StatusReview, page[0].Stored.Record.Status)
		require.NotEmpty(t, next)
		page, next, err = s.Reviews(ctx, "acme", next, 1)
		require.NoError(t, err)
		require.Len(t, page, 1)
		require.Equal(t, "d2", page[0].Input.ID)
		if next != "" {
			page, next, err = s.Reviews(ctx, "acme", next, 1)
			require.NoError(t, err)
			require.Empty(t, page)
			require.Empty(t, next)
		}
		_, _, err = s.Reviews(ctx, "acme", "not-a-cursor", 1)
		var fe *results.InputError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "cursor", fe.Fields[0].Path)

		fb := results.Feedback{RequestID: "req_f", DecisionID: "d1", Tenant: "acme", Option: "b", Source: "review", By: "alice", At: time.Unix(1700000100, 0).UTC()}
		a, err := results.GiveFeedback(ctx, s, fb)
		require.NoError(t, err)
		require.False(t, a.Replay)
		require.Equal(t, "b", a.Label.Option)
		require.Empty(t, a.History)
		a, err = results.GiveFeedback(ctx, s, fb)
		require.NoError(t, err)
		require.True(t, a.Replay, "the same answer again is a replay")
		fb2 := fb
		fb2.Option, fb2.By, fb2.At = "a", "bob", fb.At.Add(time.Minute)
		a, err = results.GiveFeedback(ctx, s, fb2)
		require.NoError(t, err)
		require.Equal(t, "a", a.Label.Option)
		require.Equal(t, "bob", a.Label.By)
		require.Len(t, a.History, 1)
		require.Equal(t, "alice", a.History[0].By)
		labels, err := s.Labels(ctx, "req_f", "d1")
		require.NoError(t, err)
		require.Len(t, labels, 2, "never a duplicate label")

		page, _, err = s.Reviews(ctx, "acme", "", 10)
		require.NoError(t, err)
		require.Len(t, page, 1, "an answered review leaves the inbox")
		require.Equal(t, "d2", page[0].Input.ID)
		page, _, err = s.Reviews(ctx, "globex", "", 10)
		require.NoError(t, err)
		require.Len(t, page, 1, "each tenant has its own inbox")

		bad := fb
		bad.Option = "zzz"
		_, err = results.GiveFeedback(ctx, s, bad)
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "option", fe.Fields[0].Path)
		require.Contains(t, fe.Fields[0].Message, `"a", "b"`)
		bad.Option = ""
		_, err = results.GiveFeedback(ctx, s, bad)
		require.ErrorAs(t, err, &fe)
		other := fb
		other.Tenant = "globex"
		_, err = results.GiveFeedback(ctx, s, other)
		require.ErrorIs(t, err, results.ErrNotFound, "another tenant's decision does not exist for this caller")
		unknown := fb
		unknown.DecisionID = "nope"
		_, err = results.GiveFeedback(ctx, s, unknown)
		require.ErrorIs(t, err, results.ErrNotFound)
		queued := fb
		queued.DecisionID = "d4"
		_, err = results.GiveFeedback(ctx, s, queued)
		require.ErrorIs(t, err, results.ErrNotPublished)

		var got []results.Labeled
		require.NoError(t, s.EachLabeled(ctx, results.LabelFilter{Tenant: "acme"}, func(l results.Labeled) error {
			got = append(got, l)
			return nil
		}))
		require.Len(t, got, 1)
		require.Equal(t, "a", got[0].Label.Option)
		require.Equal(t, "d1", got[0].Stored.Record.DecisionID)
		got = nil
		require.NoError(t, s.EachLabeled(ctx, results.LabelFilter{Tenant: "acme", To: fb.At}, func(l results.Labeled) error {
			got = append(got, l)
			return nil
		}))
		require.Empty(t, got, "labeled after the range")
	})
}
