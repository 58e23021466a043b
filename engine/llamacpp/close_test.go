//go:build cgo

package llamacpp

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
)

// Close while 8 callers score: every Score call is answered (scored,
// refused or closed), none waits forever. Each trial closes after a
// different number of answers (none, while the first calls are still
// being prepared and queued, up to four), so Close meets the callers at
// different points. A call never answered hangs wg.Wait, and go test's
// -timeout fails the run with every goroutine's stack.
func TestCloseUnderLoadAnswersEveryCaller(t *testing.T) {
	for trial := 0; trial < 30; trial++ {
		e, err := New(Options{ModelPath: tinyPath})
		if err != nil {
			t.Fatal(err)
		}
		answered := make(chan struct{}, 8*50) // never full: one per call
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 50; k++ {
					_, err := e.Score(context.Background(), []decision.Decision{routing("x", fmt.Sprint("state ", g, k))})
					answered <- struct{}{}
					if err != nil {
						return
					}
				}
			}()
		}
		for range trial % 5 {
			<-answered
		}
		e.Close()
		wg.Wait()
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
	for i := 0; i < 20; i++ {
		// A call that waited for the stopped loop would hang here (go
		// test's -timeout reports it).
		_, err := e.Score(context.Background(), []decision.Decision{routing("x", "s")})
		require.ErrorIs(t, err, engine.ErrClosed)
	}
}
