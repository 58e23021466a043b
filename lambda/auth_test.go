package lambda_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/auth"
	"github.com/verdict-dev/verdict/lambda"
)

const semifBody = `{"id": "a", "state": "s", "question": "q?", "options": [{"id": "x", "description": ""}, {"id": "y", "description": ""}]}`

// TestAuthenticateUsesTheAuthRules: the front door checks keys by package
// auth's rules (either header, any case of Bearer, two different keys
// refused) and answers auth's 401.
func TestAuthenticateUsesTheAuthRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	post := func(h *lambda.Handler, kv ...string) *lambda.Response {
		hdr := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i+1 < len(kv); i += 2 {
			hdr.Set(kv[i], kv[i+1])
		}
		return h.Handle(context.Background(), &lambda.Request{Method: "POST", Path: lambda.PathDecisions, Header: hdr, Body: []byte(semifBody)})
	}
	require.Equal(t, http.StatusAccepted, post(b.h, "Authorization", "BEARER "+testKey).Status)
	require.Equal(t, http.StatusAccepted, post(b.h, "Authorization", "Bearer "+testKey, "X-Api-Key", testKey).Status)
	for kv, want := range map[[4]string]error{
		{"Authorization", "Bearer " + testKey, "X-Api-Key", "other-key-987654321"}: auth.ErrTwoKeys,
		{"X-Api-Key", "wrong"}:                auth.ErrBadKey,
		{"Authorization", "Basic " + testKey}: auth.ErrNoKey, // another scheme is not a key
	} {
		resp := post(b.h, kv[:]...)
		require.Equal(t, http.StatusUnauthorized, resp.Status, kv)
		var got, wantBody lambda.ErrorBody
		require.NoError(t, json.Unmarshal(resp.Body, &got))
		require.NoError(t, json.Unmarshal(lambda.Unauthorized(want).Body, &wantBody))
		require.Equal(t, wantBody.Code, got.Code, kv)
		require.Equal(t, wantBody.Message, got.Message, kv)
		require.NotEmpty(t, got.RequestID, "every error answer carries a request id")
		require.Equal(t, got.RequestID, resp.Header.Get("X-Request-Id"))
		require.Equal(t, auth.Challenge, resp.Header.Get("WWW-Authenticate"))
	}

	// No keys and anonymous callers accepted: authentication is off, and a
	// key the client always sends is not checked.
	open := setup(t, func(c *lambda.Config) { c.APIKeys, c.AllowAnonymous = nil, true })
	require.Equal(t, http.StatusAccepted, post(open.h, "Authorization", "Bearer anything").Status)
}
