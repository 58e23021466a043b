package results_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

func TestFileKeepsOneAndLooksUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := results.OpenFile(filepath.Join(t.TempDir(), "results.db"))
	require.NoError(t, err)
	defer st.Close()
	first := record("r1", "d1", "t", decision.StatusDecided, "a")
	require.NoError(t, st.Publish(ctx, []sink.Record{first, record("r1", "d2", "t", decision.StatusDecided, "a"), record("r2", "d1", "t", decision.StatusDecided, "a")}))
	changed := record("r1", "d1", "t", decision.StatusDecided, "a")
	changed.Status = decision.StatusError
	require.NoError(t, st.Publish(ctx, []sink.Record{changed}), "a redelivery is accepted")
	n, err := st.Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	got, err := st.Get(ctx, "r1", "d1")
	require.NoError(t, err)
	require.Equal(t, decision.StatusDecided, got.Record.Status, "the first copy is kept")
	want, _ := first.Marshal()
	require.Equal(t, string(want), string(got.Body))
	byReq, err := st.ByRequest(ctx, "r1")
	require.NoError(t, err)
	require.Len(t, byReq, 2)
	require.Equal(t, "d1", byReq[0].Record.DecisionID)
	require.Equal(t, "d2", byReq[1].Record.DecisionID)
	byDec, err := st.ByDecision(ctx, "d1")
	require.NoError(t, err)
	require.Len(t, byDec, 2)
	_, err = st.Get(ctx, "nope", "d1")
	require.ErrorIs(t, err, results.ErrNotFound)
	none, err := st.ByRequest(ctx, "nope")
	require.NoError(t, err)
	require.Empty(t, none)
}
