package queue_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/queue"
)

// A body that is not JSON is ErrBadEnvelope and keeps the decoder's error.
func TestBadEnvelopeKeepsItsCause(t *testing.T) {
	t.Parallel()
	_, err := queue.UnmarshalEnvelope([]byte(`{"version":`))
	require.ErrorIs(t, err, queue.ErrBadEnvelope)
	var se *json.SyntaxError
	_, err2 := queue.UnmarshalEnvelope([]byte(`{"version": 1,,}`))
	require.True(t, errors.As(err2, &se), "the json.SyntaxError is kept: %v", err2)
	require.ErrorIs(t, err2, queue.ErrBadEnvelope)
}
