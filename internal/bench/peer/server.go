package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/verdict-dev/verdict/internal/hugepages"
)

// kind is which program a system under test runs: it decides how the
// server is told its address and which path says it is ready.
type kind int

const (
	verdictServe kind = iota + 1 // `verdict serve`
	llamaServer                  // llama-server of llama.cpp
)

// listenArgs are the flags that put a server of kind k on 127.0.0.1:port.
func (k kind) listenArgs(port int) []string {
	if k == verdictServe {
		return []string{"--addr", "127.0.0.1:" + strconv.Itoa(port)}
	}
	return []string{"--host", "127.0.0.1", "--port", strconv.Itoa(port)}
}

// health is the path that answers 200 once a server of kind k takes
// requests.
func (k kind) health() string {
	if k == verdictServe {
		return "/ping"
	}
	return "/health"
}

// system is a server under test as configured, before it is started.
type system struct {
	name string // how the log and errors name it: "llama-server --parallel 4"
	kind kind
	bin  string
	args []string // its flags, all but the address (kind.listenArgs adds it)
}

// Bounds of a server's life.
const (
	// readyTimeout bounds a server's start: loading the model included.
	readyTimeout = 5 * time.Minute
	// stopTimeout is how long a server may take to exit after an
	// interrupt before it is killed.
	stopTimeout = 20 * time.Second
	// reapGrace is how long a failed request waits for its server's exit
	// to be seen: a server that dies fails the requests in flight a moment
	// before its process is reaped.
	reapGrace = 2 * time.Second
	// startAttempts bounds the starts of one server whose port was taken
	// between being found free and the server's listening on it.
	startAttempts = 3
	// tailLines is how many of a server's last output lines an error
	// carries: enough for a Go panic's trace of the goroutine that
	// panicked, or llama.cpp's assertion and backtrace.
	tailLines = 40
)

// server is a started system: its child process, what it printed last
// and, once it has exited, how.
type server struct {
	system
	url  string
	cmd  *exec.Cmd
	out  *tail         // the last of its stderr and stdout, interleaved
	done chan struct{} // closed once the process has exited and is reaped
	wait error         // cmd.Wait's result; read only after done
}

// ExitError says that a server under test exited while the comparison
// still needed it: which one, how it exited, and what it printed last.
type ExitError struct {
	// Server names it as the log does ("verdict serve").
	Server string
	// Status is how it exited: "exit status 1", "signal: killed".
	Status string
	// Output is its last lines of stderr and stdout.
	Output string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("%s exited (%s); its last output:\n%s", e.Server, e.Status, e.Output)
}

// start runs sys on a free port of 127.0.0.1 and waits until its health
// path answers 200. A server that exits before that because its port was
// taken in the meantime (the port is found free by listening on it and
// closing it again, and another process may take it before the server
// listens) is started again on another port.
func start(ctx context.Context, sys system, log io.Writer) (*server, error) {
	for attempt := 1; ; attempt++ {
		s, err := launch(sys)
		if err != nil {
			return nil, err
		}
		err = s.awaitReady(ctx)
		if err == nil {
			fmt.Fprintf(log, "%s ready at %s\n", sys.name, s.url)
			return s, nil
		}
		var exit *ExitError
		if attempt < startAttempts && errors.As(err, &exit) && s.portTaken(exit.Output) {
			fmt.Fprintf(log, "%s: %s was taken before it listened; trying another port\n", sys.name, s.url)
			continue
		}
		return nil, err
	}
}

// portTaken tells whether a server that exited before it was ready found
// its port taken: it said so (verdict serve: "address already in use";
// llama-server, when it logs: "couldn't bind"), or the port is still
// taken now.
func (s *server) portTaken(output string) bool {
	if strings.Contains(output, "address already in use") || strings.Contains(output, "couldn't bind") {
		return true
	}
	ln, err := net.Listen("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		return true
	}
	ln.Close()
	return false
}

// launch starts sys's process on a port that is free now.
func launch(sys system) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &server{system: sys, url: "http://127.0.0.1:" + strconv.Itoa(port), out: newTail(64 << 10), done: make(chan struct{})}
	s.cmd = exec.Command(sys.bin, append(append([]string(nil), sys.args...), sys.kind.listenArgs(port)...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	// Wait returns this long after the process exits even if a child of
	// it still holds its output open.
	s.cmd.WaitDelay = time.Second
	// Every server starts from the environment this run was started with:
	// llama-server runs as its users run it, without the malloc tunable
	// verdict added to its own (verdict serve adds it again itself).
	s.cmd.Env = hugepages.Original(os.Environ())
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", sys.name, err)
	}
	go func() {
		s.wait = s.cmd.Wait()
		close(s.done)
	}()
	return s, nil
}

// freePort is a port of 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// awaitReady polls the server's health path until it answers 200, the
// process exits, ctx is done or readyTimeout passes; it stops the server
// on every outcome but the first.
func (s *server) awaitReady(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+s.kind.health(), nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				// Another process on the port may have answered: ours
				// must still be running.
				if err := s.exited(); err != nil {
					return fmt.Errorf("%s did not start: %w", s.name, err)
				}
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("%s did not start: %w", s.name, s.exited())
		case <-ctx.Done():
			s.stop()
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	s.stop()
	return fmt.Errorf("%s did not become ready in %v; its last output:\n%s", s.name, readyTimeout, s.out.lastLines(tailLines))
}

// exited is the server's ExitError once its process has exited and been
// reaped, nil before.
func (s *server) exited() error {
	select {
	case <-s.done:
	default:
		return nil
	}
	status := "exit status 0"
	if s.wait != nil {
		status = s.wait.Error()
	}
	return &ExitError{Server: s.name, Status: status, Output: s.out.lastLines(tailLines)}
}

// explain is err with the server's exit added when the server has exited
// (a request to a server that died fails with no more than "connection
// refused" or "EOF"); err alone while the server runs.
func (s *server) explain(err error) error {
	if err == nil || errors.As(err, new(*ExitError)) || errors.Is(err, context.Canceled) {
		return err
	}
	select {
	case <-s.done:
	case <-time.After(reapGrace):
		return err
	}
	return fmt.Errorf("%w: %w", err, s.exited())
}

// signal sends sig to the server; what for ("pause") names the step in
// the error. A server that has exited is reported as such: its status and
// last output, not "process already finished".
func (s *server) signal(sig os.Signal, what string) error {
	err := s.cmd.Process.Signal(sig)
	if errors.Is(err, os.ErrProcessDone) {
		<-s.done // Signal says so only once Wait has reaped the process
		return fmt.Errorf("%s: %s: %w", s.name, what, s.exited())
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w", s.name, what, err)
	}
	return nil
}

// stop ends the server: an interrupt, and after stopTimeout a kill.
func (s *server) stop() {
	_ = s.resume() // a stopped process would not handle the interrupt
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// tail keeps the last max bytes written to it; the child's output
// goroutines and the caller may use it at once.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// lastLines is the last n lines written, or "(none)".
func (t *tail) lastLines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := bytes.TrimRight(t.b, "\n")
	if len(b) == 0 {
		return "(none)"
	}
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			if n--; n == 0 {
				return string(b[i+1:])
			}
		}
	}
	return string(b)
}
