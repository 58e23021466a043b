//go:build llamacpp

package llamacpp

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/decision"
)

func TestRegressionCloseUnderLoad(t *testing.T) {
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
