//go:build cgo

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeReferenceIsCurrent keeps the README's command-line reference
// equal to what the binary prints: a new or changed flag fails this test
// until `make docs` regenerates the section.
func TestReadmeReferenceIsCurrent(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(b)
	start := strings.Index(readme, "<!-- cli:start -->\n")
	end := strings.Index(readme, "<!-- cli:end -->")
	require.True(t, start >= 0 && end > start, "README lacks the cli markers")
	got := readme[start+len("<!-- cli:start -->\n") : end]
	require.Equal(t, markdownReference(), got, "README command-line reference is stale: run `make docs`")
	// Every flag of every command is named in it, with its variable rule.
	for name := range commands {
		require.Contains(t, got, "### verdict "+name)
	}
	require.Contains(t, readme, "VERDICT_<FLAG>")
}
