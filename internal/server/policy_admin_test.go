package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/server"
	"github.com/verdict-dev/verdict/policy"
)

// The reload API sits behind the same bearer keys as every other route.
func TestPolicyAdminRoute(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.yaml")
	require.NoError(t, os.WriteFile(path, []byte("kinds:\n  default: {}\n"), 0o644))
	h, err := policy.NewHolder(path)
	require.NoError(t, err)
	b := setup(t, server.Config{APIKeys: map[string]string{"k1": "acme"}, PolicyAdmin: h.Handler()})

	r := do(t, http.MethodPost, b.url+"/admin/policy", nil)
	require.Equal(t, http.StatusUnauthorized, r.status)
	r = do(t, http.MethodGet, b.url+"/admin/policy", nil, "Authorization", "Bearer k1")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, h.Current().Version(), r.json(t)["version"])

	require.NoError(t, os.WriteFile(path, []byte("kinds:\n  default:\n    min_probability: 0.9\n"), 0o644))
	r = do(t, http.MethodPost, b.url+"/admin/policy", nil, "Authorization", "Bearer k1")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, h.Current().Version(), r.json(t)["version"])

	r = do(t, http.MethodDelete, b.url+"/admin/policy", nil, "Authorization", "Bearer k1")
	require.Equal(t, http.StatusMethodNotAllowed, r.status)

	// Without a PolicyAdmin the route does not exist.
	plain := setup(t, server.Config{})
	require.Equal(t, http.StatusNotFound, do(t, http.MethodGet, plain.url+"/admin/policy", nil).status)
}
