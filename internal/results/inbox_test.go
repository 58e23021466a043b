package results_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

// TestInboxOf100000PagesInBoundedMemory: a tenant with 100,000 open
// reviews is paged through in full, each page one indexed query, and the
// live heap never holds more than a few pages' worth.
func TestInboxOf100000PagesInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED in -short: stores 100,000 reviews")
	}
	t.Parallel()
	const n = 100_000
	f, err := results.OpenFile(filepath.Join(t.TempDir(), "results.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	ctx := context.Background()
	batch := make([]sink.Record, 0, 5000)
	for i := range n {
		batch = append(batch, reviewRecord(fmt.Sprintf("req_%06d", i/4), fmt.Sprintf("d%d", i%4), "acme"))
		if len(batch) == cap(batch) {
			require.NoError(t, f.Publish(ctx, batch))
			batch = batch[:0]
		}
	}
	require.NoError(t, f.Publish(ctx, []sink.Record{reviewRecord("req_other", "d0", "globex")}))

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := heap()
	var peak uint64
	seen, pages, cursor := 0, 0, ""
	last := ""
	for {
		page, next, err := f.Reviews(ctx, "acme", cursor, results.MaxReviewsPage)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), results.MaxReviewsPage)
		for _, r := range page {
			key := r.Stored.Record.Key()
			require.Less(t, last, key, "oldest first, each once") // same store time: request, then decision id
			last = key
		}
		seen += len(page)
		pages++
		if h := heap(); h > peak {
			peak = h
		}
		if next == "" {
			break
		}
		cursor = next
	}
	require.Equal(t, n, seen, "every open review, and only the tenant's")
	require.Equal(t, n/results.MaxReviewsPage, pages)
	grown := int64(peak) - int64(base)
	t.Logf("%d pages; live heap grew by at most %d KiB while paging", pages, grown/1024)
	require.Less(t, grown, int64(8<<20), "paging holds a page, not the inbox")
}
