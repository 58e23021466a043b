package lambda_test

import (
	"net"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// newLocalServer serves h on a free port of 127.0.0.1 until the test ends.
func newLocalServer(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return "http://" + l.Addr().String()
}

// tempDir is t.TempDir without the test's name in the path: fuzz seeds are
// named "seed#0", and a '#' in a SQLite file name starts the URI fragment
// of the DSN (sqlite.Open does not escape it).
func tempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "verdict-lambda-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
