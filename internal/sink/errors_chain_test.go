package sink_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/sink"
)

// A refused reply URL keeps the parse error that refused it in the chain,
// under both sentinels.
func TestWebhookRefusalKeepsItsCause(t *testing.T) {
	t.Parallel()
	w, err := sink.NewWebhook(sink.WebhookConfig{Secret: []byte("k"), Backoff: time.Millisecond})
	require.NoError(t, err)
	defer w.Close()
	r := rec("r", "d")
	r.Reply = []string{"http://[::1"}
	err = w.Publish(context.Background(), []sink.Record{r})
	require.ErrorIs(t, err, sink.ErrPermanent)
	require.ErrorIs(t, err, sink.ErrRefusedAddress)
	var ue *url.Error
	require.True(t, errors.As(err, &ue), "the url.Error is kept: %v", err)
}
