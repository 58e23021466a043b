#!/usr/bin/env bash
# Materialize the pinned llama.cpp source tree (see ./pin) into
# DEST (default $LLAMA_DIR/src, LLAMA_DIR defaulting to ~/.cache/verdict/llama.cpp)
# and print its path.
#
# Sources, in order:
#   1. LLAMA_SRC=/path      a checkout or plain copy already on this machine
#   2. the npm package in ./pin (`npm pack`, nothing installed or run):
#      its llama/gitRelease.bundle is cloned
#   3. a shallow git clone of the tag
# Every source is verified against the pinned tree hash; a mismatch is
# refused with what was found. Nothing of llama.cpp is committed here.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
pin() { sed -n "s/^$1=//p" "$here/pin"; }
TAG="$(pin tag)"
TREE="$(pin tree)"
NPM="$(pin npm)"
REPO="$(pin repo)"
DEST="${1:-${LLAMA_SRC_DIR:-${LLAMA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/verdict/llama.cpp}/src}}"
CACHE="${LLAMA_CACHE_DIR:-$(dirname "$DEST")/cache}"

log() { echo "llama.cpp source: $*" >&2; }
die() { echo "llama.cpp source: $*" >&2; exit 1; }

# tree_of DIR prints the git tree hash of every file under DIR (but .git
# and our own stamp), without touching DIR: an extra file is a mismatch.
tree_of() {
	local dir="$1" tmp
	tmp="$(mktemp -d)"
	git init -q --bare "$tmp/g"
	GIT_DIR="$tmp/g" GIT_WORK_TREE="$dir" GIT_INDEX_FILE="$tmp/index" git add -A -f -- . ":(exclude).verdict-tree" >/dev/null 2>&1 ||
		{ rm -rf "$tmp"; return 1; }
	GIT_DIR="$tmp/g" GIT_WORK_TREE="$dir" GIT_INDEX_FILE="$tmp/index" git write-tree
	rm -rf "$tmp"
}

# verify DIR WHAT: refuse a tree that is not the pinned one.
verify() {
	local dir="$1" what="$2" got
	if [ -e "$dir/.git" ]; then
		# A git checkout: its HEAD's tree, and no local changes.
		got="$(git -C "$dir" rev-parse 'HEAD^{tree}' 2>/dev/null || echo none)"
		if [ "$got" = "$TREE" ] && [ -n "$(git -C "$dir" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
			die "$what: HEAD has tree $got (the pinned $TAG) but the checkout has local changes; refusing it"
		fi
	else
		got="$(tree_of "$dir" || echo unreadable)"
	fi
	if [ "$got" != "$TREE" ]; then
		die "$what: found tree $got, the pin ($here/pin) wants $TAG = tree $TREE; refusing it"
	fi
}

# A tree already in place is re-checked on every use, not trusted by its
# stamp: a persistent git index beside it (DEST.index) makes that cheap,
# since git rehashes only the files whose size or times changed.
index="$DEST.index"
check_in_place() {
	local got changed
	got="$(GIT_DIR="$index" GIT_WORK_TREE="$DEST" GIT_INDEX_FILE="$index/index" git add -A -f -- . ":(exclude).verdict-tree" 2>/dev/null &&
		GIT_DIR="$index" GIT_WORK_TREE="$DEST" GIT_INDEX_FILE="$index/index" git write-tree 2>/dev/null)" || got=unreadable
	[ "$got" = "$TREE" ] && return 0
	changed="$(GIT_DIR="$index" GIT_INDEX_FILE="$index/index" git diff --cached --name-status "$TREE" 2>/dev/null | head -3 | tr '\t\n' ' ;')"
	die "$DEST is not the pinned $TAG (tree $got, want $TREE${changed:+; differs: $changed}); remove it to fetch it again: rm -rf '$DEST' '$index'"
}
index_in_place() {
	rm -rf "$index"
	git init -q --bare "$index"
	check_in_place
}

stamp="$DEST/.verdict-tree"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$TREE" ] && [ -z "${LLAMA_SRC:-}" ]; then
	if [ -d "$index" ]; then check_in_place; else index_in_place; fi
	echo "$DEST"
	exit 0
fi
if [ -e "$DEST" ] && [ -z "${LLAMA_SRC:-}" ]; then
	log "$DEST is incomplete (no record of a verified $TAG); fetching it again"
fi

mkdir -p "$(dirname "$DEST")"
tmpdest="$DEST.tmp.$$"
trap 'rm -rf "$tmpdest"' EXIT

if [ -n "${LLAMA_SRC:-}" ]; then
	[ -d "$LLAMA_SRC" ] || die "LLAMA_SRC=$LLAMA_SRC is not a directory"
	log "checking LLAMA_SRC=$LLAMA_SRC"
	verify "$LLAMA_SRC" "LLAMA_SRC=$LLAMA_SRC"
	if [ "$(cd "$LLAMA_SRC" && pwd)" = "$(mkdir -p "$DEST" && cd "$DEST" && pwd)" ]; then
		echo "$TREE" >"$stamp"
		echo "$DEST"
		exit 0
	fi
	rm -rf "$tmpdest"
	mkdir -p "$tmpdest"
	if [ -e "$LLAMA_SRC/.git" ]; then
		git -C "$LLAMA_SRC" archive --format=tar 'HEAD' | tar -x -C "$tmpdest"
	else
		cp -a "$LLAMA_SRC/." "$tmpdest/"
	fi
else
	got=""
	if [ -n "$NPM" ] && command -v npm >/dev/null 2>&1; then
		mkdir -p "$CACHE"
		tgz="$(ls "$CACHE"/node-llama-cpp-*.tgz 2>/dev/null | head -1 || true)"
		if [ -z "$tgz" ]; then
			log "npm pack $NPM (download only: nothing is installed or run)"
			(cd "$CACHE" && npm pack --silent --ignore-scripts "$NPM" >/dev/null) || log "npm pack failed"
			tgz="$(ls "$CACHE"/node-llama-cpp-*.tgz 2>/dev/null | head -1 || true)"
		fi
		if [ -n "$tgz" ]; then
			rm -rf "$CACHE/unpack" && mkdir -p "$CACHE/unpack"
			tar -xzf "$tgz" -C "$CACHE/unpack" package/llama/gitRelease.bundle
			rm -rf "$tmpdest"
			git -c advice.detachedHead=false clone -q "$CACHE/unpack/package/llama/gitRelease.bundle" "$tmpdest"
			rm -rf "$CACHE/unpack"
			verify "$tmpdest" "$NPM llama/gitRelease.bundle"
			got=npm
		fi
	fi
	if [ -z "$got" ]; then
		log "git clone --depth 1 --branch $TAG $REPO"
		rm -rf "$tmpdest"
		git -c advice.detachedHead=false clone -q --depth 1 --branch "$TAG" "$REPO" "$tmpdest" || die "no source: set LLAMA_SRC, or make npm or git reach their registries"
		verify "$tmpdest" "git clone of $TAG"
	fi
	rm -rf "$tmpdest/.git"
fi

# Re-check the copy itself, then move it into place in one step.
verify "$tmpdest" "copy in $tmpdest"
echo "$TREE" >"$tmpdest/.verdict-tree"
rm -rf "$DEST"
mv "$tmpdest" "$DEST"
trap - EXIT
index_in_place
log "$TAG (tree $TREE) in $DEST"
echo "$DEST"
