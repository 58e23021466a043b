//go:build unix

package peer

import (
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sh is a system that runs script in sh; the address flags start adds
// become the script's unused arguments.
func sh(name, script string) system {
	return system{name: name, kind: llamaServer, bin: "sh", args: []string{"-c", script, "sh"}}
}

// pause stops a server's process and resume continues it; stop ends a
// paused one with its interrupt (it is continued first, so it sees the
// interrupt and is not left for the kill).
func TestPauseStopsTheProcessUntilResumed(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// exec: the shell becomes sleep, same pid, and the listen flags launch
	// adds go to the shell, not to sleep (which would refuse them and exit
	// at once, leaving the test to race its reaping).
	s, err := launch(sh("sleep", "exec sleep 60"))
	require.NoError(t, err)
	// state is the process's state letter, "gone" once it was reaped.
	state := func() string {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/stat")
		if err != nil {
			return "gone"
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		return f[0]
	}
	require.Eventually(t, func() bool { return state() == "S" }, 5*time.Second, 10*time.Millisecond, "sleep is running: %s", state())
	require.NoError(t, s.pause())
	require.Eventually(t, func() bool { return state() == "T" }, 5*time.Second, 10*time.Millisecond, "paused: stopped")
	require.NoError(t, s.resume())
	require.Eventually(t, func() bool { st := state(); return st == "S" || st == "R" }, 5*time.Second, 10*time.Millisecond, "resumed: running or sleeping")
	require.NoError(t, s.pause())
	s.stop()
	var exit *ExitError
	require.ErrorAs(t, s.exited(), &exit)
	require.Equal(t, "signal: interrupt", exit.Status, "ended by the interrupt, not the kill")
}

// A server that has exited is reported by name, with its exit status and
// its last lines of output, whichever step finds it gone: pausing,
// resuming or a failed request.
func TestAnExitedServerSaysHowItExited(t *testing.T) {
	script := `i=0; while [ $i -lt 50 ]; do i=$((i+1)); echo "line $i"; done; echo "fatal: out of cheese" >&2; exit 3`
	s, err := launch(sh("verdict serve", script))
	require.NoError(t, err)
	<-s.done

	for _, err := range []error{s.pause(), s.resume(), s.explain(errors.New("connection refused"))} {
		var exit *ExitError
		require.ErrorAs(t, err, &exit)
		require.Equal(t, "verdict serve", exit.Server)
		require.Equal(t, "exit status 3", exit.Status)
		require.True(t, strings.HasSuffix(exit.Output, "line 50\nfatal: out of cheese"), exit.Output)
		require.Len(t, strings.Split(exit.Output, "\n"), tailLines, "its last lines only")
		require.Contains(t, err.Error(), "verdict serve exited (exit status 3); its last output:\nline 12\n")
	}
	require.ErrorContains(t, s.pause(), "verdict serve: pause: verdict serve exited")
	require.ErrorContains(t, s.explain(errors.New("connection refused")), "connection refused: verdict serve exited")
}

// A server that exits before it is ready fails start with its exit; one
// whose port was taken before it listened is started again on another
// port, at most startAttempts times.
func TestStartReportsAServerThatExitsBeforeReady(t *testing.T) {
	var log strings.Builder
	_, err := start(t.Context(), sh("llama-server --parallel 1", `echo "error: bad model" >&2; exit 1`), &log)
	var exit *ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, "exit status 1", exit.Status)
	require.Contains(t, err.Error(), "llama-server --parallel 1 did not start: llama-server --parallel 1 exited (exit status 1); its last output:\nerror: bad model")
	require.NotContains(t, log.String(), "another port")

	log.Reset()
	_, err = start(t.Context(), sh("verdict serve", `echo "verdict serve: flag --addr: listen tcp: bind: address already in use" >&2; exit 1`), &log)
	require.ErrorAs(t, err, &exit)
	require.Equal(t, startAttempts-1, strings.Count(log.String(), "trying another port"), log.String())
}

// tail keeps the last bytes written and gives back their last lines.
func TestTailKeepsTheLastLines(t *testing.T) {
	tl := newTail(16)
	require.Equal(t, "(none)", tl.lastLines(3))
	_, _ = io.WriteString(tl, "one\ntwo\n")
	require.Equal(t, "one\ntwo", tl.lastLines(3))
	require.Equal(t, "two", tl.lastLines(1))
	_, _ = io.WriteString(tl, "three\nfour\nfive\nsix\n")
	require.Equal(t, "e\nfour\nfive\nsix", tl.lastLines(5), "no more than its 16 bytes")
}

// A server whose port another process holds is started again on another
// port even when it exits without saying why (llama-server under
// --log-disable).
func TestPortTakenByAnotherProcess(t *testing.T) {
	s, err := launch(sh("llama-server --parallel 1", "exit 1"))
	require.NoError(t, err)
	<-s.done
	require.False(t, s.portTaken(""), "a free port: the exit had another cause")
	ln, err := net.Listen("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	defer ln.Close()
	require.True(t, s.portTaken(""), "held by another process")
	require.True(t, (&server{url: "http://127.0.0.1:1"}).portTaken("bind: address already in use"), "said so")
}
