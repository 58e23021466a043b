//go:build cgo

package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
)

// Close while 8 callers score: every Score call is answered (scored,
// refused or closed), none waits forever.
func TestCloseUnderLoadAnswersEveryCaller(t *testing.T) {
	var hung atomic.Int64
	for trial := 0; trial < 30; trial++ {
		e, err := New(Options{ModelPath: tinyPath})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 50; k++ {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, err := e.Score(ctx, []decision.Decision{routing("x", fmt.Sprint("state ", g, k))})
					cancel()
					if err == context.DeadlineExceeded {
						hung.Add(1)
					}
					if err != nil {
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(trial%5) * time.Millisecond)
		e.Close()
		wg.Wait()
	}
	if hung.Load() > 0 {
		t.Fatalf("%d Score calls never answered after Close", hung.Load())
	}
}

// Score after Close answers ErrClosed at once (the window where a caller
// passed the closed check and enqueued after the loop had drained is
// closed by Engine.life; TestCloseUnderLoadAnswersEveryCaller races it
// for real).
func TestScoreAfterCloseAnswersErrClosed(t *testing.T) {
	e, err := New(Options{ModelPath: tinyPath})
	require.NoError(t, err)
	require.NoError(t, e.Close())
	hung := 0
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := e.Score(ctx, []decision.Decision{routing("x", "s")})
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			hung++
		} else {
			require.ErrorIs(t, err, engine.ErrClosed)
		}
	}
	require.Zero(t, hung, "Score calls that would wait forever without a deadline")
}
