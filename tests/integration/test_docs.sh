#!/usr/bin/env bash
# The user docs (README.md, CHANGELOG.md, docs/*.md), read by docs_check.py:
#   - every relative link names a file that exists and, with an anchor, a
#     heading of that file;
#   - no commit hash: the docs say what is, not which commit measured it;
#   - README.md stays a front page: at most 250 lines, with install,
#     upgrade and troubleshooting among the headings of its first screenfuls.
# Each check also runs on a copy of the docs given the defect it looks for
# (a dead anchor, a missing file, a hash, a README grown long): the control
# that shows it can fail.
#
# No network namespace: it reads files only.
# Standalone: bash tests/integration/test_docs.sh
# shellcheck disable=SC1091
set -u
. "$(dirname "$0")/lib.sh"
tg_require_tools python3

CHECK=$TG_LIB_DIR/docs_check.py
WORK=$(mktemp -d "${TG_TMP_BASE:-/dev/shm}/tollgate-docs.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT

# copy_docs DIR: README, CHANGELOG and docs/ as the checkout has them
copy_docs() {
	mkdir -p "$1/docs"
	cp "$TG_ROOT/README.md" "$TG_ROOT/CHANGELOG.md" "$1/"
	cp "$TG_ROOT"/docs/*.md "$1/docs/"
}

# clean WHAT: the checkout's docs pass check WHAT
clean() {
	local out
	out=$(python3 "$CHECK" --root "$TG_ROOT" "$1" 2>&1) || t_fail "$(head -c 1500 <<<"$out")"
}

# caught WHAT DIR PATTERN: check WHAT fails on DIR, naming PATTERN
caught() {
	local out rc=0
	out=$(python3 "$CHECK" --root "$2" "$1" 2>&1) || rc=$?
	[ "$rc" -eq 1 ] || t_fail "control: check $1 exit $rc on a copy with a defect, expected 1"
	grep -q -- "$3" <<<"$out" || t_fail "control: check $1 did not name '$3': ${out:0:300}"
}

t_begin "every relative link of the docs names a file and a heading that exist"
clean links
D=$WORK/links
copy_docs "$D"
echo 'See [the pool](docs/runbook.md#no-such-heading) and [design](docs/nowhere.md).' >>"$D/README.md"
caught links "$D" "#no-such-heading"
caught links "$D" "docs/nowhere.md: no such file"
t_end

t_begin "no commit hash in the docs"
clean history
D=$WORK/history
copy_docs "$D"
echo 'Measured at main 01b082b, as before.' >>"$D/docs/performance.md"
caught history "$D" "'01b082b' looks like a commit hash"
t_end

t_begin "README.md: at most 250 lines; install, upgrade and troubleshooting in its first screenfuls"
clean readme
lines=$(wc -l <"$TG_ROOT/README.md")
diag "README.md: $lines lines"
D=$WORK/readme
copy_docs "$D"
yes 'More detail that belongs in docs/.' | head -n 300 >>"$D/README.md"
caught readme "$D" "more than 250"
D=$WORK/readme2
copy_docs "$D"
{ printf '# Tollgate\n'; yes 'An introduction that pushes everything down.' | head -n 130; cat "$TG_ROOT/README.md"; } >"$D/README.md.t"
mv "$D/README.md.t" "$D/README.md"
caught readme "$D" "no heading about 'install'"
t_end

tap_done
