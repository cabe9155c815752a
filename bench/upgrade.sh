#!/usr/bin/env bash
# A rolling update, tested (docs/operating.md, "Upgrading"): builds the
# previous release's binary, then runs the test that starts it and this
# checkout's binary on one Postgres at once, starts flows on both, stops the
# old one with work in flight and checks the new one finishes every flow
# (tests/api/operate/upgrade.rs).
#
#   bash bench/upgrade.sh              the previous release: the newest tag
#                                      reachable from HEAD that is not HEAD
#   bash bench/upgrade.sh v0.1.0       a tag or commit of your choice
#
# Needs Postgres as the tests do (TARTAN_TEST_DATABASE_URL, default
# postgres://postgres@127.0.0.1:5432/postgres). The previous release is
# built in its own worktree and target directory under target/upgrade/
# (a first build takes minutes; later runs reuse it). Not part of the
# default test run, which builds one release only.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

previous="${1:-}"
if [ -z "$previous" ]; then
  previous="$(git describe --tags --abbrev=0 "HEAD^" 2>/dev/null || true)"
  if [ -z "$previous" ]; then
    echo "bench/upgrade.sh: no earlier tag to upgrade from; name a tag or commit" >&2
    exit 1
  fi
fi
commit="$(git rev-parse --verify "$previous^{commit}")"
work="$root/target/upgrade/$commit"
if [ ! -x "$work/target/debug/tartan" ]; then
  echo "== building the previous release, $previous ($commit)"
  mkdir -p "$root/target/upgrade"
  if [ ! -d "$work/src" ]; then
    git worktree add --detach "$work/src" "$commit" > /dev/null
  fi
  (cd "$work/src" && CARGO_TARGET_DIR="$work/target" cargo build --locked --bin tartan)
fi
echo "== $previous and this checkout on one Postgres"
TARTAN_PREVIOUS_BINARY="$work/target/debug/tartan" \
  cargo test --test api -- --ignored --exact \
  operate::upgrade::the_previous_release_and_this_one_run_together_and_finish_each_others_flows
