package bench

import (
	"os"
	"path/filepath"
)

// JevBenchDir is where make jevbench puts JevBench-240 (cases.jsonl and
// gold.jsonl), relative to the module root.
const JevBenchDir = ".verdict/data/jevbench-240"

// JevBenchHowTo says in one line how to get JevBench-240, which is not
// part of this repository.
const JevBenchHowTo = "run make jevbench (JEVBENCH=DIR copies one already on this machine), or set VERDICT_JEVBENCH to where it is"

// JevBenchCases is the cases file JevBench-240's path names: the path
// itself, or its cases.jsonl when it names the folder (as eval and
// calibrate take VERDICT_JEVBENCH).
func JevBenchCases(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Join(path, "cases.jsonl")
	}
	return path
}
