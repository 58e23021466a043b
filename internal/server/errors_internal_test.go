package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
)

// Every per-decision code answers with the status decision gives it; the
// overloads share the one overloaded answer with Retry-After.
func TestResultErrorStatusComesFromTheCode(t *testing.T) {
	t.Parallel()
	for _, c := range []decision.Code{decision.CodeMalformed, decision.CodeInvalid, decision.CodeUnsupported, decision.CodeTooLarge,
		decision.CodeForbidden, decision.CodeBusy, decision.CodeUnavailable, decision.CodeClosed, decision.CodeTimeout,
		decision.CodeCalibration, decision.CodeEngine, decision.CodeInternal, "something_new"} {
		e := resultError("q", &decision.Error{Code: c, Message: "m"})
		require.Equal(t, c.Status(), e.status, c)
		require.Equal(t, c.Overload(), e.retryAfter, c)
		if c.Overload() {
			require.Equal(t, decision.CodeOverloaded, e.code, c)
		} else {
			require.Equal(t, c, e.code)
		}
	}
}

func TestScoreErrorStatusComesFromTheCode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err    error
		status int
	}{
		{engine.ErrBusy, http.StatusServiceUnavailable},
		{fmt.Errorf("x: %w", engine.ErrClosed), http.StatusServiceUnavailable},
		{engine.ErrUnavailable, http.StatusServiceUnavailable},
		{context.DeadlineExceeded, http.StatusGatewayTimeout},
		{context.Canceled, decision.StatusClientClosedRequest},
		{engine.ErrContextFull, http.StatusRequestEntityTooLarge},
		{errors.New("boom"), http.StatusInternalServerError},
	}
	for _, c := range cases {
		e := scoreError(c.err, time.Second)
		require.Equal(t, c.status, e.status, c.err.Error())
		require.Equal(t, decision.CodeOf(c.err, decision.CodeEngine).Status(), e.status, c.err.Error())
	}
}
