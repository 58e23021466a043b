//go:build unix

package peer

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pause stops a server's process and resume continues it; stop ends a
// paused one (it is continued first, so it sees the interrupt).
func TestPauseStopsTheProcessUntilResumed(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	s := &server{name: "sleep", cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	state := func() string {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
		if err != nil {
			t.Skip("no /proc")
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		return f[0]
	}
	require.NoError(t, s.pause())
	require.Eventually(t, func() bool { return state() == "T" }, 5*time.Second, 10*time.Millisecond, "paused: stopped")
	require.NoError(t, s.resume())
	require.Eventually(t, func() bool { return state() != "T" }, 5*time.Second, 10*time.Millisecond, "resumed: running or sleeping")
	require.NoError(t, s.pause())
	start := time.Now()
	s.stop()
	require.Less(t, time.Since(start), 10*time.Second, "a paused server still stops at once")
}
