#!/usr/bin/env bash
# The oldest versions package.json's peer ranges claim, and the previous lines of the ORMs users still
# run, each a tested fact: a scratch copy of the checkout installs the lowest version of every range of
# knex, mysql2 and @nestjs/common + @nestjs/core (read from package.json, so the claim and this lane
# cannot part), @nestjs/testing of the same version, and the previous Kysely and MikroORM lines named
# below, then runs the tests that exercise them against the server the tests find (harness/server.ts:
# MYSQL_URL, else RWLOCK_TEST_SERVER, ...). docs/orms.md names the ORM versions (test/orm/* checks it).
# Needs the checkout's files and access to the npm registry.
# Usage: bash .ci/oldest-versions.sh            (both parts, in a temporary directory)
#        bash .ci/oldest-versions.sh prepare DIR (the copy and its installs only, into the empty DIR)
#        bash .ci/oldest-versions.sh test DIR    (the tests only, in a DIR prepared so; then removes it)
# The two parts let CI install while other steps use the CPU, and run the tests after them.
set -euo pipefail
cd "$(dirname "$0")/.."
# Kysely 0.29 and MikroORM 7 declare Node 22.17+: on Node 20 npm installs these lines instead.
PREVIOUS_LINES=(kysely@0.28.19 @mikro-orm/core@6.6.16 @mikro-orm/mysql@6.6.16)
# What the oldest peers run: the lock itself (knex and mysql2), the fence through knex, mysql2, Kysely
# and MikroORM (MikroORM 6 on its own knex), the decorators and the NestJS example app.
TESTS=(test/quickstart.test.ts test/fencing.test.ts test/exclusion.test.ts test/with-grant.test.ts
  test/section.test.ts test/decorators.test.ts test/nestjs.test.ts test/orm/knex.test.ts
  test/orm/mysql2.test.ts test/orm/kysely.test.ts test/orm/mikro-orm.test.ts)
part=${1:-all}
case $part in
  all) work=$(mktemp -d "${TMPDIR:-/tmp}/mysql-rwlock-oldest.XXXXXX") ;;
  prepare | test) work=$(realpath "${2:?"$part needs a directory"}") ;;
  *) echo "usage: bash .ci/oldest-versions.sh [prepare DIR | test DIR]" >&2; exit 2 ;;
esac
[ "$part" = prepare ] || trap 'rm -rf "$work"' EXIT
started=$SECONDS
step() { printf '\n=== oldest-versions: %s (%ss)\n' "$1" "$((SECONDS - started))"; }
fail() { echo "oldest-versions FAILED: $*" >&2; exit 1; }

# The lowest version a peer range admits: the smallest floor of its `||` alternatives (^x.y.z each).
oldest() {
  node -e '
    const range = require("./package.json").peerDependencies[process.argv[1]];
    const floors = range.split("||").map((s) => s.trim().replace(/^\^/, ""));
    if (!floors.every((v) => /^\d+\.\d+\.\d+$/.test(v))) { console.error(`${process.argv[1]}: ${range} is not ^x.y.z alternatives`); process.exit(1); }
    const key = (v) => v.split(".").map(Number);
    floors.sort((a, b) => { const x = key(a), y = key(b); return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; });
    console.log(floors[0]);' "$1"
}

prepare() {
  step "a scratch copy of the checkout (tracked and new files, nothing ignored)"
  git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$work"
  cd "$work"
  nest=$(oldest @nestjs/common)
  [ "$(oldest @nestjs/core)" = "$nest" ] || fail "@nestjs/common and @nestjs/core claim different oldest versions"
  want=("knex@$(oldest knex)" "mysql2@$(oldest mysql2)" "@nestjs/common@$nest" "@nestjs/core@$nest"
    "@nestjs/testing@$nest" "${PREVIOUS_LINES[@]}")
  echo "installing: ${want[*]}"

  step "npm ci, then those versions over it"
  npm ci --ignore-scripts --no-audit --no-fund --prefer-offline > npm.log 2>&1 || { cat npm.log >&2; fail "npm ci"; }
  npm install --ignore-scripts --no-audit --no-fund --prefer-offline --save-exact "${want[@]}" > npm.log 2>&1 || { cat npm.log >&2; fail "npm install ${want[*]}"; }
  for spec in "${want[@]}"; do
    name=${spec%@*} version=${spec##*@}
    got=$(node -p "require('./node_modules/$name/package.json').version")
    [ "$got" = "$version" ] || fail "$name is $got at the top of node_modules, not $version"
  done
  # The library must find the same knex and mysql2 the tests do: one copy of each at the top.
  npm ls knex mysql2 @nestjs/common @nestjs/core --depth=0
}

run_tests() {
  cd "$work"
  step "the tests that run on them: ${TESTS[*]}"
  npx vitest run "${TESTS[@]}"
}

# Called as plain statements: in a condition or an || list, set -e would not stop them on a failure.
if [ "$part" != test ]; then prepare; fi
if [ "$part" != prepare ]; then
  run_tests
  step "passed"
fi
