package decision_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
)

func TestCodeStatusAndAction(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code   decision.Code
		status int
		action decision.Action
	}{
		{decision.CodeMalformed, http.StatusBadRequest, decision.ActionPublish},
		{decision.CodeInvalid, http.StatusUnprocessableEntity, decision.ActionPublish},
		{decision.CodeUnsupported, http.StatusUnprocessableEntity, decision.ActionPublish},
		{decision.CodeTooLarge, http.StatusRequestEntityTooLarge, decision.ActionPublish},
		{decision.CodeUnsupportedMediaType, http.StatusUnsupportedMediaType, decision.ActionPublish},
		{decision.CodeUnauthorized, http.StatusUnauthorized, decision.ActionPublish},
		{decision.CodeForbidden, http.StatusForbidden, decision.ActionPublish},
		{decision.CodeNotFound, http.StatusNotFound, decision.ActionPublish},
		{decision.CodeModelNotFound, http.StatusNotFound, decision.ActionPublish},
		{decision.CodeMethodNotAllowed, http.StatusMethodNotAllowed, decision.ActionPublish},
		{decision.CodeConflict, http.StatusConflict, decision.ActionPublish},
		{decision.CodeBusy, http.StatusServiceUnavailable, decision.ActionRetry},
		{decision.CodeOverloaded, http.StatusServiceUnavailable, decision.ActionRetry},
		{decision.CodeUnavailable, http.StatusServiceUnavailable, decision.ActionRetry},
		{decision.CodeTimeout, http.StatusGatewayTimeout, decision.ActionRetry},
		{decision.CodeClosed, http.StatusServiceUnavailable, decision.ActionRelease},
		{decision.CodeCanceled, decision.StatusClientClosedRequest, decision.ActionRelease},
		{decision.CodeCalibration, http.StatusInternalServerError, decision.ActionPublish},
		{decision.CodeEngine, http.StatusInternalServerError, decision.ActionPublish},
		{decision.CodeInternal, http.StatusInternalServerError, decision.ActionPublish},
		{decision.Code("something_new"), http.StatusInternalServerError, decision.ActionPublish},
	}
	for _, c := range cases {
		require.Equal(t, c.status, c.code.Status(), c.code)
		require.Equal(t, c.action, c.code.Action(), c.code)
		require.Equal(t, c.action == decision.ActionRetry, c.code.Retryable(), c.code)
		require.Equal(t, c.status == http.StatusServiceUnavailable, c.code.Overload(), c.code)
	}
}

func TestCodeOf(t *testing.T) {
	t.Parallel()
	errBusy := decision.NewSentinel(decision.CodeBusy, "test: busy")
	_, _, tooLarge := decision.ParseSemIf([]byte(`{"state": "`+strings.Repeat("x", 64)+`", "question": "q", "options": [{"id": "a"}, {"id": "b"}]}`),
		decision.Limits{MaxStateBytes: 8})
	_, _, invalid := decision.ParseSemIf([]byte(`{"state": "s", "question": "q", "options": [{"id": "a"}, {"id": "a"}]}`), decision.DefaultLimits())
	cases := []struct {
		name string
		err  error
		want decision.Code
	}{
		{"nil", nil, ""},
		{"sentinel", errBusy, decision.CodeBusy},
		{"wrapped sentinel", fmt.Errorf("score: %w", errBusy), decision.CodeBusy},
		{"first coded error of a %w: %w", fmt.Errorf("%w: %w", decision.ErrTooLarge, errBusy), decision.CodeTooLarge},
		{"joined", errors.Join(errors.New("x"), errBusy), decision.CodeBusy},
		{"malformed", decision.ErrMalformed, decision.CodeMalformed},
		{"validation error", invalid, decision.CodeInvalid},
		{"size limit", tooLarge, decision.CodeTooLarge},
		{"result error", &decision.Error{Code: decision.CodeUnavailable}, decision.CodeUnavailable},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), decision.CodeCanceled},
		{"deadline", context.DeadlineExceeded, decision.CodeTimeout},
		{"a code wins over the context", fmt.Errorf("%w: %w", errBusy, context.Canceled), decision.CodeBusy},
		{"plain error", errors.New("boom"), decision.CodeEngine},
	}
	for _, c := range cases {
		require.Equal(t, c.want, decision.CodeOf(c.err, decision.CodeEngine), c.name)
	}
	require.ErrorIs(t, fmt.Errorf("w: %w", errBusy), errBusy, "a coded sentinel is an ordinary sentinel for errors.Is")

	e := decision.ErrorFor(invalid, decision.CodeEngine)
	require.Equal(t, decision.CodeInvalid, e.Code)
	require.NotEmpty(t, e.Fields)
	require.False(t, e.Retryable)
	require.True(t, decision.ErrorFor(errBusy, decision.CodeEngine).Retryable)
}
