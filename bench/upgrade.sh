#!/usr/bin/env bash
# A rolling update, tested (docs/operating.md, "Upgrading"): builds the
# previous release's binary, then runs the test that starts it and this
# checkout's binary on one Postgres at once, starts flows on both, stops the
# old one with work in flight and checks the new one finishes every flow
# (tests/api/operate/upgrade.rs).
#
#   bash bench/upgrade.sh              the previous release: the newest one
#                                      recorded in migrations/RELEASES
#                                      (CONTRIBUTING.md, "Releasing") whose
#                                      code is not this checkout's
#   bash bench/upgrade.sh v0.1.0       a recorded release, a tag or a commit
#
# Needs Postgres as the tests do (TARTAN_TEST_DATABASE_URL, default
# postgres://postgres@127.0.0.1:5432/postgres). The previous release is
# built in its own worktree and target directory under target/upgrade/
# (a first build takes minutes; later runs reuse it). Not part of the
# default test run, which builds one release only.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

# `vX.Y.Z COMMIT MIGRATION` lines, oldest first: the record survives
# where tags do not (a clone without them).
recorded() { awk '!/^#/ && NF == 3 { print $1, $2 }' migrations/RELEASES; }
previous="${1:-}"
if [ -z "$previous" ]; then
  # The newest whose code differs from this checkout's (not the release
  # just recorded, whose record is all that follows it).
  previous="$(recorded | tac | while read -r version commit; do
    if ! git diff --quiet "$commit" HEAD -- . ':(exclude)migrations/RELEASES'; then
      echo "$version"
      break
    fi
  done)"
  if [ -z "$previous" ]; then
    echo "bench/upgrade.sh: migrations/RELEASES records no earlier release; name a tag or commit" >&2
    exit 1
  fi
fi
# A recorded version stands for its commit.
target="$(recorded | awk -v v="$previous" '$1 == v { c = $2 } END { print c }')"
target="${target:-$previous}"
commit="$(git rev-parse --verify "$target^{commit}")"
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
