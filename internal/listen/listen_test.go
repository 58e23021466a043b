package listen_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/listen"
)

// safetyNet is far longer than any timeout these tests configure: reaching
// it means the server held a stalled connection open.
const safetyNet = 20 * time.Second

// start serves h on a random loopback port with cfg.
func start(t *testing.T, h http.Handler, cfg listen.Config) string {
	t.Helper()
	s, err := listen.New(h, cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return ln.Addr().String()
}

// readBody answers 408 when the body does not arrive in time, as verdict's
// handlers do.
var readBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if _, err := io.ReadAll(r.Body); errors.Is(err, os.ErrDeadlineExceeded) {
		w.WriteHeader(http.StatusRequestTimeout)
		return
	}
	w.WriteHeader(http.StatusOK)
})

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// outcome reads what the server does with a stalled connection: the status
// of its answer, or 0 when it closed the connection without one. Reaching
// the safety net fails the test.
func outcome(t *testing.T, c net.Conn) int {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(safetyNet)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept a stalled connection open: %v", err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestStalledHeadersAreDisconnected(t *testing.T) {
	t.Parallel()
	addr := start(t, readBody, listen.Config{HeaderTimeout: 100 * time.Millisecond})
	c := dial(t, addr)
	_, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-")
	require.NoError(t, err)
	// net/http closes the connection, after a 400 when a partial request
	// line or header arrived.
	require.Contains(t, []int{0, http.StatusBadRequest, http.StatusRequestTimeout}, outcome(t, c))
}

func TestStalledBodyIsAnswered408OrDisconnected(t *testing.T) {
	t.Parallel()
	addr := start(t, readBody, listen.Config{BodyTimeout: 200 * time.Millisecond})
	var conns []net.Conn
	for range 20 {
		c := dial(t, addr)
		_, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"state\":")
		require.NoError(t, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		got := outcome(t, c)
		require.Contains(t, []int{0, http.StatusRequestTimeout}, got)
	}
}

func TestIdleConnectionIsClosed(t *testing.T) {
	t.Parallel()
	addr := start(t, readBody, listen.Config{IdleTimeout: 100 * time.Millisecond})
	c := dial(t, addr)
	_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(safetyNet)))
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the idle connection is closed by the server")
}

// get sends one keep-alive request on c and reads the answer.
func get(t *testing.T, c net.Conn, br *bufio.Reader) int {
	t.Helper()
	_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(safetyNet)))
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestConnectionBound(t *testing.T) {
	t.Parallel()
	addr := start(t, readBody, listen.Config{MaxConns: 2, RetryAfter: 3 * time.Second})
	// Two kept-alive connections hold both places.
	held := make([]net.Conn, 2)
	for i := range held {
		held[i] = dial(t, addr)
		require.Equal(t, http.StatusOK, get(t, held[i], bufio.NewReader(held[i])))
	}
	// A third is answered 503 at once and closed.
	c := dial(t, addr)
	br := bufio.NewReader(c)
	_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(safetyNet)))
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "3", resp.Header.Get("Retry-After"))
	require.Contains(t, string(body), `"code":"overloaded"`)
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF)

	// Closing one gives its place back.
	require.NoError(t, held[0].Close())
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		return get(t, c, bufio.NewReader(c)) == http.StatusOK
	}, safetyNet, 10*time.Millisecond)
}

func TestConfigRefusesNegatives(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]listen.Config{
		"HeaderTimeout": {HeaderTimeout: -1}, "BodyTimeout": {BodyTimeout: -1}, "WriteTimeout": {WriteTimeout: -1},
		"IdleTimeout": {IdleTimeout: -1}, "MaxConns": {MaxConns: -1}, "RetryAfter": {RetryAfter: -1},
	} {
		_, err := listen.New(readBody, cfg)
		require.ErrorIs(t, err, listen.ErrConfig, name)
		require.ErrorContains(t, err, name)
	}
}
