package worker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/worker"
)

// The crash and signal tests run a worker in a subprocess: this test binary
// again, with helperEnv set to a JSON helperSpec. It handles SIGTERM and
// SIGINT like `verdict worker`: the first stops gracefully, the second
// releases at once.
const helperEnv = "VERDICT_WORKER_TEST_HELPER"

type helperSpec struct {
	Kind        string        `json:"kind"`
	QueuePath   string        `json:"queue_path,omitempty"`
	StorePath   string        `json:"store_path,omitempty"`
	MaxReceives int           `json:"max_receives,omitempty"`
	QueueURL    string        `json:"queue_url,omitempty"`
	ResultsURL  string        `json:"results_url,omitempty"`
	Endpoint    string        `json:"endpoint,omitempty"`
	Visibility  time.Duration `json:"visibility"`
	Shutdown    time.Duration `json:"shutdown"`
	SlowDelay   time.Duration `json:"slow_delay"`
	CallDelay   time.Duration `json:"call_delay"`
	Concurrency int           `json:"concurrency"`
	MaxMessages int           `json:"max_messages"`
	// DeleteDelay widens the window between publishing and deleting, where
	// a crash leads to duplicates.
	DeleteDelay time.Duration `json:"delete_delay"`
}

// slowDeleteQueue delays deletes (test-only latency injection).
type slowDeleteQueue struct {
	queue.Queue
	delay time.Duration
}

func (q slowDeleteQueue) Delete(ctx context.Context, receipts []string) ([]error, error) {
	time.Sleep(q.delay)
	return q.Queue.Delete(ctx, receipts)
}

func helperMain(spec string) {
	var s helperSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, "helper spec:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	var (
		q   queue.Queue
		snk sink.Sink
		err error
	)
	switch s.Kind {
	case "local":
		var st *sink.Store
		if q, err = queue.OpenLocal(queue.LocalConfig{Path: s.QueuePath, MaxReceives: s.MaxReceives, PollInterval: 20 * time.Millisecond}); err == nil {
			st, err = sink.OpenStore(s.StorePath)
			snk = st
		}
	case "sqs":
		m := &queuetest.Moto{Endpoint: s.Endpoint}
		ac := m.AWS()
		if q, err = queue.NewSQS(ctx, queue.SQSConfig{URL: s.QueueURL, Endpoint: s.Endpoint, AWS: &ac}); err == nil {
			snk, err = sink.NewSQS(m.SQS(), s.ResultsURL)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	if s.DeleteDelay > 0 {
		q = slowDeleteQueue{Queue: q, delay: s.DeleteDelay}
	}
	w, err := worker.New(worker.Config{
		Queue: q, Scorer: &fakeScorer{SlowDelay: s.SlowDelay, CallDelay: s.CallDelay}, Sinks: []sink.Sink{snk},
		Visibility: s.Visibility, Wait: time.Second, ShutdownTimeout: s.Shutdown, RetryBase: worker.None,
		Concurrency: s.Concurrency, MaxMessages: s.MaxMessages, Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println("ready") // startHelper waits for this line
	go func() {
		<-sigs
		go func() {
			<-sigs
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = w.Stop(ctx) // second signal: release now
		}()
		ctx, cancel := context.WithTimeout(context.Background(), s.Shutdown)
		defer cancel()
		_ = w.Stop(ctx)
	}()
	if err := w.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	q.Close()
	os.Exit(0)
}

// startHelper starts a worker subprocess.
func startHelper(t *testing.T, s helperSpec) *exec.Cmd {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(b))
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line == "ready\n"
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-ready:
		require.True(t, ok, "worker subprocess failed to start")
	case <-time.After(30 * time.Second):
		t.Fatal("worker subprocess did not start")
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// waitExit waits for a subprocess to exit and returns its exit code.
func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(within):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("worker subprocess did not exit within %v", within)
		return -1
	}
}
