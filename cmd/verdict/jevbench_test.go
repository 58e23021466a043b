package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// eval and calibrate without a DIR take JevBench-240 from VERDICT_JEVBENCH
// (the folder, or its cases.jsonl as bench takes it) or from where make
// jevbench puts it, and without either say in one line how to get it.
func TestJevBenchDirWhenNoneIsGiven(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gold.jsonl"), []byte("{}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte("{}\n"), 0o644))

	t.Setenv("VERDICT_JEVBENCH", dir)
	got, err := jevbenchDir()
	require.NoError(t, err)
	require.Equal(t, dir, got)

	t.Setenv("VERDICT_JEVBENCH", filepath.Join(dir, "cases.jsonl"))
	got, err = jevbenchDir()
	require.NoError(t, err)
	require.Equal(t, dir, got)

	t.Setenv("VERDICT_JEVBENCH", filepath.Join(t.TempDir(), "missing"))
	_, err = jevbenchDir()
	require.ErrorContains(t, err, "run make jevbench")

	var l labeledFlags
	t.Setenv("VERDICT_JEVBENCH", dir)
	require.NoError(t, l.resolve(nil))
	require.Equal(t, filepath.Join(dir, "gold.jsonl"), l.gold)
	require.Equal(t, filepath.Join(dir, "cases.jsonl"), l.cases)
}
