#!/usr/bin/env bash
# The adapter tests (test/orm/*) on the newest Node 22 as well: Kysely 0.29 and MikroORM 7, which the
# checkout installs, declare Node 22.17 or later, so that is where their users run them (npm test
# runs them on the CI machine's Node 20). Node 22 is the `node` npm package's binary, cached as
# .ci/consumer-matrix.sh caches it (~/.cache/mysql-rwlock/consumer/node@<version>). The server is the
# one the tests find (harness/server.ts). Needs npm ci and the npm registry.
# Usage: bash .ci/orms-on-node22.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${CONSUMER_MATRIX_CACHE:-$HOME/.cache/mysql-rwlock/consumer}
fail() { echo "orms-on-node22 FAILED: $*" >&2; exit 1; }

version=$(npm view node@22 version --json | node -e '
  const v = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const key = (s) => s.split(".").map(Number);
  console.log([].concat(v).sort((a, b) => { const x = key(a), y = key(b); return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; }).at(-1));')
dir="$cache/node@$version"
if [ ! -e "$dir/.complete" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.install.XXXXXX")
  echo '{ "private": true }' > "$tmp/package.json"
  (cd "$tmp" && npm install --no-audit --no-fund --prefer-offline "node@$version" > npm.log 2>&1) \
    || { cat "$tmp/npm.log" >&2; rm -rf "$tmp"; fail "npm install node@$version"; }
  touch "$tmp/.complete"
  rm -rf "$dir"
  mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp" # another run finished the same install first
fi
node22="$dir/node_modules/node/bin/node"
[ "$("$node22" --version)" = "v$version" ] || fail "$node22 is not node $version"
echo "node $version: test/orm/* with $(node -p "['kysely', '@mikro-orm/core'].map((p) => p + '@' + require('./node_modules/' + p + '/package.json').version).join(', ')")"
# Its own JSON report, beside (not over) the npm test lanes' that .ci/run tallies.
"$node22" node_modules/vitest/vitest.mjs run test/orm --outputFile.json=.tmp/vitest-report-orms-node22.json
