package policy_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/policy"
)

func TestHolderHandlerReloads(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.yaml")
	require.NoError(t, os.WriteFile(path, []byte("kinds:\n  default: {}\n"), 0o644))
	h, err := policy.NewHolder(path)
	require.NoError(t, err)
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	state := func(resp *http.Response) map[string]any {
		defer resp.Body.Close()
		var m map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
		return m
	}
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	v1 := state(resp)["version"]

	// A good new file is swapped in.
	require.NoError(t, os.WriteFile(path, []byte("kinds:\n  default:\n    min_probability: 0.5\n"), 0o644))
	resp, err = http.Post(srv.URL, "", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	v2 := state(resp)["version"]
	require.NotEqual(t, v1, v2)
	require.Equal(t, v2, h.Current().Version())

	// A bad file answers 422 and keeps the current policy.
	require.NoError(t, os.WriteFile(path, []byte("kinds: [broken"), 0o644))
	resp, err = http.Post(srv.URL, "", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	st := state(resp)
	require.Equal(t, v2, st["version"])
	require.NotEmpty(t, st["error"])

	req, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}
