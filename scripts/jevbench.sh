#!/usr/bin/env bash
# Put JevBench-240 (github.com/JevBench/jevbench, Apache-2.0) where verdict
# looks for it: .verdict/data/jevbench-240/{cases,gold}.jsonl. The data set
# is not part of this repository.
#
#   make jevbench                      # a pinned git clone of the suite
#   JEVBENCH=DIR make jevbench         # a copy already on this machine (DIR holds cases.jsonl, gold.jsonl)
#
# What it finds is checked before it is used: 240 cases with 2,240
# questions, 240 gold records, the same ids, and each gold record's
# question keys equal to its case's. A copy that fails is refused with
# what differs.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=https://github.com/JevBench/jevbench.git
COMMIT=1a3a115105872691137f6c7a7bcc83be95d7ebac
DEST="${DATA:-.verdict}/data/jevbench-240"
die() { echo "jevbench: $*" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ -n "${JEVBENCH:-}" ]; then
	[ -f "$JEVBENCH/cases.jsonl" ] && [ -f "$JEVBENCH/gold.jsonl" ] || die "JEVBENCH=$JEVBENCH holds no cases.jsonl and gold.jsonl"
	cp "$JEVBENCH/cases.jsonl" "$JEVBENCH/gold.jsonl" "$tmp/"
	from="JEVBENCH=$JEVBENCH"
else
	git -c advice.detachedHead=false clone -q "$REPO" "$tmp/repo" 2>"$tmp/git.log" ||
		die "git clone $REPO failed ($(tail -1 "$tmp/git.log")); set JEVBENCH=DIR to a copy on this machine"
	git -C "$tmp/repo" checkout -q "$COMMIT" || die "commit $COMMIT not in $REPO"
	cp "$tmp/repo/src/jevbench/suites/jevbench-240/cases.jsonl" "$tmp/cases.jsonl"
	cp "$tmp/repo/data/gold.jsonl" "$tmp/gold.jsonl"
	from="$REPO at ${COMMIT:0:12}"
fi
python3 - "$tmp/cases.jsonl" "$tmp/gold.jsonl" <<'PY' || die "$from is not JevBench-240 (above)"
import json, sys
cases = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
gold = {g["id"]: g["gold"] for g in (json.loads(l) for l in open(sys.argv[2]) if l.strip())}
questions = sum(len(c["questions"]) for c in cases)
problems = []
if len(cases) != 240: problems.append("%d cases, want 240" % len(cases))
if questions != 2240: problems.append("%d questions, want 2,240" % questions)
if len(gold) != 240: problems.append("%d gold records, want 240" % len(gold))
ids = [c["id"] for c in cases]
if len(set(ids)) != len(ids): problems.append("duplicate case ids")
for c in cases:
    if c["id"] not in gold: problems.append("case %s has no gold record" % c["id"]); break
    if set(gold[c["id"]]) != set(c["questions"]): problems.append("case %s: gold keys differ from its questions" % c["id"]); break
if problems:
    print("jevbench: " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
PY
rm -rf "$DEST" && mkdir -p "$DEST"
cp "$tmp/cases.jsonl" "$tmp/gold.jsonl" "$DEST/"
echo "jevbench: JevBench-240 (240 cases, 2,240 questions) from $from in $DEST"
