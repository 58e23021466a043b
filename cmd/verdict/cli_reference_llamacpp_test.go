//go:build cgo

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCLIReferenceIsCurrent keeps docs/cli.md, the command-line
// reference, equal to what the binary prints: a new or changed flag fails
// this test until `make docs` regenerates it.
func TestCLIReferenceIsCurrent(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "<!-- cli:start -->\n")
	end := strings.Index(doc, "<!-- cli:end -->")
	require.True(t, start >= 0 && end > start, "docs/cli.md lacks the cli markers")
	got := doc[start+len("<!-- cli:start -->\n") : end]
	require.Equal(t, markdownReference(), got, "docs/cli.md is stale: run `make docs`")
	// Every command is in it, and the rule for flags' variables.
	for name := range commands {
		require.Contains(t, got, "### verdict "+name)
	}
	require.Contains(t, doc, "VERDICT_<FLAG>")
}
