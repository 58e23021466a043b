package bench

// JevBenchDir is where make jevbench puts JevBench-240 (cases.jsonl and
// gold.jsonl), relative to the module root.
const JevBenchDir = ".verdict/data/jevbench-240"

// JevBenchHowTo says in one line how to get JevBench-240, which is not
// part of this repository.
const JevBenchHowTo = "run make jevbench (JEVBENCH=DIR copies one already on this machine), or set VERDICT_JEVBENCH to where it is"
