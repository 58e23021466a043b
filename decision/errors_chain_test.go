package decision_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
)

// Malformed JSON is ErrMalformed and keeps the decoder's error.
func TestMalformedKeepsItsCause(t *testing.T) {
	t.Parallel()
	_, _, err := decision.ParseSemIf([]byte(`{"state": "s",,}`), decision.DefaultLimits())
	require.ErrorIs(t, err, decision.ErrMalformed)
	var se *json.SyntaxError
	require.True(t, errors.As(err, &se), "the json.SyntaxError is kept: %v", err)
}
