package worker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/worker"
)

// The crash and signal tests run a worker in a subprocess: this test binary
// again, with helperEnv set to a JSON helperSpec. It handles SIGTERM and
// SIGINT like `verdict worker`: the first stops gracefully, the second
// releases at once. It reports events on its standard output, one a line,
// for the test to wait on (helper.events):
//
//	ready           the worker is built and the signals are watched
//	scoring ID,…    a Scorer call for these decisions has started
//	deleting        a Delete call has started (its records are published)
//	escalated       decisions were sent on to the gpu pool's queue
//	signal          the first SIGTERM or SIGINT was received
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
	Concurrency int           `json:"concurrency"`
	MaxMessages int           `json:"max_messages"`
	// BlockAt makes the worker wait, once it reports the step, until the
	// call's context ends (or the test kills it): "score" blocks every
	// Scorer call, "delete" every Delete call, so that the test can stop
	// or kill the worker at that step. "" blocks nothing ("block"
	// decisions still block).
	BlockAt string `json:"block_at,omitempty"`
	// QueueName names the local queue within QueuePath ("" the default).
	QueueName string `json:"queue_name,omitempty"`
	// Pool, EscalateTo and Policy make the worker a cascade's first stage:
	// it serves Pool, sends what Policy escalates to the gpu pool's queue
	// EscalateTo (a local queue name within QueuePath, or an SQS URL),
	// and reports each send ("escalated").
	Pool       string `json:"pool,omitempty"`
	EscalateTo string `json:"escalate_to,omitempty"`
	Policy     string `json:"policy,omitempty"`
}

// reportingSender reports every successful Send on the helper's output.
type reportingSender struct{ queue.Sender }

func (s reportingSender) Send(ctx context.Context, msgs []queue.Outgoing) ([]error, error) {
	errs, err := s.Sender.Send(ctx, msgs)
	if err == nil {
		fmt.Println("escalated")
	}
	return errs, err
}

// reportingQueue reports every Delete call on the helper's output, and
// blocks it when block is set (test-only).
type reportingQueue struct {
	queue.Queue
	block bool
}

func (q reportingQueue) Delete(ctx context.Context, receipts []string) ([]error, error) {
	fmt.Println("deleting")
	if q.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
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
		var st *results.File
		if q, err = queue.OpenLocal(queue.LocalConfig{Path: s.QueuePath, Name: s.QueueName, MaxReceives: s.MaxReceives, PollInterval: 20 * time.Millisecond}); err == nil {
			st, err = results.OpenFile(s.StorePath)
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
	var escalate map[decision.Route]queue.Sender
	if s.EscalateTo != "" {
		var gq queue.Sender
		if s.Kind == "local" {
			gq, err = queue.OpenLocal(queue.LocalConfig{Path: s.QueuePath, Name: s.EscalateTo, PollInterval: 20 * time.Millisecond})
		} else {
			m := &queuetest.Moto{Endpoint: s.Endpoint}
			ac := m.AWS()
			gq, err = queue.NewSQS(ctx, queue.SQSConfig{URL: s.EscalateTo, Endpoint: s.Endpoint, AWS: &ac})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(2)
		}
		escalate = map[decision.Route]queue.Sender{decision.RouteGPU: reportingSender{gq}}
	}
	holder := policy.HolderOf(nil)
	if s.Policy != "" {
		p, err := policy.Parse([]byte(s.Policy))
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(2)
		}
		holder = policy.HolderOf(p)
	}
	scorer := &fakeScorer{
		StartedFunc: func(ids []string) { fmt.Println("scoring", strings.Join(ids, ",")) },
		BlockAll:    s.BlockAt == "score",
	}
	w, err := worker.New(worker.Config{
		Queue: reportingQueue{Queue: q, block: s.BlockAt == "delete"}, Scorer: scorer, Sinks: []sink.Sink{snk},
		Pool: decision.Route(s.Pool), Escalate: escalate, Policy: holder,
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
		fmt.Println("signal")
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

// helper is a worker subprocess and the events it reported.
type helper struct {
	*exec.Cmd
	events *eventLog
}

// startHelper starts a worker subprocess and waits for it to be ready.
func startHelper(t *testing.T, s helperSpec) *helper {
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
	h := &helper{Cmd: cmd, events: newEventLog()}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.events.add(sc.Text())
		}
		h.events.add("eof")
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	require.Equal(t, "ready", h.events.wait(t, "", 30*time.Second), "worker subprocess failed to start")
	return h
}

// waitExit waits for the subprocess to exit and returns its exit code.
// within only guards against a hang.
func (h *helper) waitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- h.Wait() }()
	select {
	case <-done:
		return h.ProcessState.ExitCode()
	case <-time.After(within):
		_ = h.Process.Kill()
		<-done
		t.Fatalf("worker subprocess did not exit within %v", within)
		return -1
	}
}
