package queue_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
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

// A decision that breaks a rule keeps its field errors in the chain, so
// the worker's error record can name them.
func TestInvalidEnvelopeDecisionKeepsItsFieldErrors(t *testing.T) {
	t.Parallel()
	body := []byte(`{"v": 1, "request_id": "r1", "decisions": [{"id": "d", "state": "s", "question": "q?",
		"options": [{"id": "a", "description": ""}, {"id": "a", "description": ""}]}]}`)
	env, err := queue.UnmarshalEnvelope(body)
	require.NotNil(t, env)
	require.ErrorIs(t, err, queue.ErrBadEnvelope)
	var ve *decision.ValidationError
	require.True(t, errors.As(err, &ve), "the ValidationError is kept: %v", err)
	require.NotEmpty(t, ve.Errors)
	require.Equal(t, decision.CodeInvalid, decision.CodeOf(err, decision.CodeInternal))
}
