#!/usr/bin/env bash
# The packed package in consumer apps on the toolchains users have: `npm pack` (or the tarball given
# as $1), then one scratch app per TypeScript x @types/node pair (TypeScript 5.9 and the latest 7.x;
# @types/node 20, 22 and latest), each type-checked strict, without skipLibCheck, with
# `"types": ["node"]`, under module/moduleResolution node16, nodenext and esnext/bundler: 18 checks.
# The apps' sources are .ci/consumer/<entry>.ts, which import and use every export of each entry
# point of the package (checked: an export no use file imports fails), and every ```ts block of the
# packed README.md and docs/*.md, each its own module (```ts nocheck blocks are skipped and counted;
# docs/orms.md's blocks that import an ORM are skipped and named: test/orm/* runs them with the ORMs,
# and .ci/docs-orms.sh compiles and runs them as written in a new app).
# Then the README's quick start (examples/quickstart.ts), compiled once, runs from the installed
# tarball on Node 20, 22 and 24 (the `node` npm package: a real binary from the registry) against a
# server found as pack-check.sh finds one. The docs' blocks are also compiled under each TypeScript's own
# `tsc --init` options (for esnext and es2022) and each run on Node 20, 22 and 24 against that server, in one
# database made from docs/examples.sql (.ci/consumer/run-blocks.mjs), with a planted failing block as
# control. Per toolchain, .ci/consumer/legacy/ (a NestJS service) is type-checked with experimentalDecorators
# as well. Prints a table (check, result, seconds); exits 1 on any
# failure. npm installs are cached under ~/.cache/mysql-rwlock/consumer, keyed by exact versions
# (resolved from the registry on every run, so a new release is picked up), and the type-checks are
# incremental, their .tsbuildinfo kept there too (CONSUMER_MATRIX_INCREMENTAL=0: from scratch).
# Usage: bash .ci/consumer-matrix.sh [mysql-rwlock-x.y.z.tgz]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
# A subset for a quick local run: CONSUMER_MATRIX_TYPESCRIPT=7 CONSUMER_MATRIX_TYPES_NODE=latest.
read -ra TYPESCRIPT <<< "${CONSUMER_MATRIX_TYPESCRIPT:-5.9 7}"
read -ra TYPES_NODE <<< "${CONSUMER_MATRIX_TYPES_NODE:-20 22 latest}"
read -ra NODES <<< "${CONSUMER_MATRIX_NODES:-20 22 24}"
MODES=("node16 node16" "nodenext nodenext" "esnext bundler")
JOBS=${CONSUMER_MATRIX_JOBS:-2}
cache=${CONSUMER_MATRIX_CACHE:-$HOME/.cache/mysql-rwlock/consumer}
work=$(mktemp -d "${TMPDIR:-/tmp}/mysql-rwlock-consumer.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
started=$SECONDS
step() { printf '\n=== consumer-matrix: %s (%ss)\n' "$1" "$((SECONDS - started))"; }
fail() { echo "consumer-matrix FAILED: $*" >&2; exit 1; }
quiet() { local log; log=$(mktemp "$work/log.XXXXXX"); "$@" > "$log" 2>&1 || { cat "$log" >&2; return 1; }; }
# Background jobs other than the server: how many run; wait for them all (status: how many failed).
running() { jobs -rp | grep -cvx "$server_pid" || true; }
await_jobs() {
  local failed=0 pid
  for pid in $(jobs -p | grep -vx "$server_pid"); do wait "$pid" || failed=$((failed + 1)); done
  return "$failed"
}
pkg() { node -p "require('$repo/package.json').$1"; }
mkdir -p "$cache" "$work/results"

step "a server (for the quick start; started now, awaited later)"
node --import tsx scripts/scratch-database.ts > "$work/db-url" 2> "$work/server.log" &
server_pid=$!

step "exact versions from the registry"
# One `npm view` per package (all three in parallel) lists its versions and dist-tags; each spec of
# that package resolves to its newest release (no prerelease) under that prefix, `latest` to the tag.
resolve() {
  local name=$1; shift
  npm view "$name" versions dist-tags --json 2>/dev/null | node -e '
    const { versions, "dist-tags": tags } = JSON.parse(require("fs").readFileSync(0, "utf8"));
    const key = (s) => s.split(".").map(Number);
    const releases = [].concat(versions).filter((v) => /^\d+\.\d+\.\d+$/.test(v));
    releases.sort((a, b) => { const x = key(a), y = key(b); return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; });
    for (const spec of process.argv.slice(1)) {
      const found = spec === "latest" ? tags.latest : releases.filter((v) => v.startsWith(`${spec}.`)).at(-1);
      if (!found) process.exit(1);
      console.log(`${spec} ${found}`);
    }' "$@" || fail "npm view $name found no version for one of: $*"
}
resolve typescript "${TYPESCRIPT[@]}" > "$work/versions-typescript" &
resolve @types/node "${TYPES_NODE[@]}" > "$work/versions-types-node" &
resolve node "${NODES[@]}" > "$work/versions-node" &
await_jobs || fail "$? of the version look-ups failed"
declare -A version
while read -r spec v; do version[typescript@$spec]=$v; done < "$work/versions-typescript"
while read -r spec v; do version[@types/node@$spec]=$v; done < "$work/versions-types-node"
while read -r spec v; do version[node@$spec]=$v; done < "$work/versions-node"
for spec in "${TYPESCRIPT[@]/#/typescript@}" "${TYPES_NODE[@]/#/@types/node@}" "${NODES[@]/#/node@}"; do
  [ -n "${version[$spec]:-}" ] || fail "no version for $spec"
  echo "$spec: ${version[$spec]}"
done

step "toolchains and Node binaries (cached in $cache)"
# Installs packages $2... into cache dir $1 once; a dir is used only once its install completed.
cached_install() {
  local dir=$1; shift
  [ -e "$dir/.complete" ] && return 0
  local tmp
  tmp=$(mktemp -d "$cache/.install.XXXXXX")
  echo '{ "private": true }' > "$tmp/package.json"
  (cd "$tmp" && quiet npm install --no-audit --no-fund --prefer-offline "$@") || { rm -rf "$tmp"; return 1; }
  touch "$tmp/.complete"
  rm -rf "$dir"
  mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp" # another run finished the same install first
}
pairs=()
for ts in "${TYPESCRIPT[@]}"; do
  for types in "${TYPES_NODE[@]}"; do
    pair="typescript@${version[typescript@$ts]}+types-node@${version[@types/node@$types]}"
    pairs+=("$pair")
    cached_install "$cache/$pair" "typescript@${version[typescript@$ts]}" "@types/node@${version[@types/node@$types]}" &
  done
done
for major in "${NODES[@]}"; do cached_install "$cache/node@${version[node@$major]}" "node@${version[node@$major]}" & done
await_jobs || fail "$? of the cached installs failed (their npm output is above)"
for major in "${NODES[@]}"; do
  bin="$cache/node@${version[node@$major]}/node_modules/node/bin/node"
  # The npm package must hold the real binary of that version, not a wrapper around another node.
  [ "$(head -c 4 "$bin" | od -An -c | tr -d ' ')" = '177ELF' ] || fail "$bin is not an ELF binary"
  [ "$("$bin" --version)" = "v${version[node@$major]}" ] || fail "$bin is not node ${version[node@$major]}"
done
du -sh "$cache" | awk '{ print "cache: " $1 }'

step "npm pack, and the tarball installed in a base app"
if [ $# -gt 0 ]; then
  tarball=$(realpath "$1")
else
  quiet npm pack --pack-destination "$work" || fail "npm pack failed"
  tarball=$(ls "$work"/mysql-rwlock-*.tgz)
fi
echo "$(basename "$tarball")"
base="$work/base"
mkdir "$base"
cd "$base"
npm init -y > /dev/null
npm pkg set type=module
# As the README says (npm install mysql-rwlock knex mysql2), with the peers' ranges; prom-client for
# mysql-rwlock/prometheus, @opentelemetry/api for mysql-rwlock/otel, @nestjs/common and @nestjs/core for
# mysql-rwlock/nestjs.
quiet npm install --no-audit --no-fund --prefer-offline "$tarball" "knex@$(pkg peerDependencies.knex)" \
  "mysql2@$(pkg peerDependencies.mysql2)" "prom-client@$(pkg "peerDependencies['prom-client']")" \
  "@opentelemetry/api@$(pkg "peerDependencies['@opentelemetry/api']")" \
  "@nestjs/common@$(pkg "peerDependencies['@nestjs/common']")" "@nestjs/core@$(pkg "peerDependencies['@nestjs/core']")" \
  || fail "npm install of the tarball failed"
# npm installs mysql2's peer @types/node (the latest) with it, as in a user's app; each app below
# replaces it with its own, as `npm install -D @types/node@20` does.
[ ! -e node_modules/typescript ] || fail "the installed package brings its own TypeScript"
npm ls --depth=0 | tail -n +2
cd "$repo"

step "the apps' sources: a use file per entry point, the docs' ts blocks"
mkdir "$work/app-src"
node .ci/consumer/prepare.mjs "$base/node_modules/mysql-rwlock" "$work/app-src" > "$work/entries" || fail "use files and entry points disagree"
link_tree() { cp -al "$1" "$2" 2>/dev/null || { rm -rf "$2"; cp -a "$1" "$2"; }; }
apps=()
for pair in "${pairs[@]}"; do
  app="$work/$pair"
  apps+=("$app")
  mkdir "$app"
  cp "$base/package.json" "$app/"
  cp -r "$work/app-src/src" "$app/src"
  # A NestJS service compiled with experimentalDecorators, apart from src/ (standard decorators).
  cp -r .ci/consumer/legacy "$app/src-legacy"
  # Hard links (copies if the cache is on another filesystem): one flat node_modules, as npm makes.
  link_tree "$base/node_modules" "$app/node_modules"
  shopt -s nullglob
  for dep in "$cache/$pair/node_modules"/[!.@]* "$cache/$pair/node_modules"/@*/*; do
    dep=${dep#"$cache/$pair/node_modules/"}
    rm -rf "$app/node_modules/$dep"
    mkdir -p "$(dirname "$app/node_modules/$dep")"
    link_tree "$cache/$pair/node_modules/$dep" "$app/node_modules/$dep"
  done
  shopt -u nullglob
  for mode in "${MODES[@]}"; do
    set -- $mode
    cat > "$app/tsconfig.$2.json" <<EOF
{
  "compilerOptions": {
    "strict": true,
    "skipLibCheck": false,
    "noEmit": true,
    "incremental": true,
    "tsBuildInfoFile": ".tsbuildinfo/$2",
    "target": "es2022",
    "types": ["node"],
    "module": "$1",
    "moduleResolution": "$2"
  },
  "include": ["src"]
}
EOF
  done
done

# Runs check $1 (a name for the table) as command $2...; its result and seconds go to $work/results.
check() {
  local name=$1 t0=$SECONDS status=pass; shift
  "$@" > "$work/results/$name.log" 2>&1 || status=FAIL
  echo "$status $((SECONDS - t0))" > "$work/results/$name.result"
}

# A slot in the pool of $JOBS background checks (2: the CI machine has 2 cores).
slot() { while [ "$(running)" -ge "$JOBS" ]; do wait -n $(jobs -rp | grep -vx "$server_pid") 2>/dev/null || true; done; }

# TypeScript 7 has no JavaScript API: the coverage check needs an app with TypeScript 5.
api_app=
for app in "${apps[@]}"; do [[ $(basename "$app") != typescript@5.* ]] || { api_app=$app; break; }; done
if [ -n "$api_app" ]; then
  step "every export is imported and used (TypeScript API of $(basename "${api_app%%+*}")), in the pool below"
  check "exports-covered" node .ci/consumer/coverage.mjs "$api_app" tsconfig.nodenext.json < "$work/entries" &
else
  step "every export is imported and used: NOT CHECKED, no TypeScript 5 in CONSUMER_MATRIX_TYPESCRIPT"
fi

# In the app, so that errors name src/examples/README-L12.ts, not a path into the temporary dir.
typecheck() { cd "$1" && node node_modules/typescript/bin/tsc -p "$2"; }

# The quick start, compiled once (with emit, so not incremental) while the type-checks run; the
# libraries it loads are type-checked by the checks above, so not again here (skipLibCheck).
quickstart="${apps[0]}"
cp examples/quickstart.ts "$quickstart/quickstart.ts"
cat > "$quickstart/tsconfig.quickstart.json" <<'EOF'
{
  "compilerOptions": { "strict": true, "skipLibCheck": true, "target": "es2022", "types": ["node"], "module": "nodenext", "moduleResolution": "nodenext", "outDir": "out" },
  "files": ["quickstart.ts"]
}
EOF
slot
check "quickstart-compiles" typecheck "$quickstart" tsconfig.quickstart.json &

# Incremental: each (toolchain, resolution) keeps its .tsbuildinfo in the cache between runs, so a
# warm run re-checks only the files whose content or resolved imports changed (the package's .d.ts,
# the use files, the docs' blocks) and takes the diagnostics of the unchanged libraries (@types/node,
# knex, mysql2, prom-client) from it. TypeScript compares every file's hash and the options, so a
# change anywhere is checked anew. CONSUMER_MATRIX_INCREMENTAL=0 checks everything from scratch.
incremental=${CONSUMER_MATRIX_INCREMENTAL:-1}
mkdir -p "$cache/tsbuildinfo"
typecheck_cached() {
  local app=$1 resolution=$2 kept="$cache/tsbuildinfo/$(basename "$1")+$2" status=0
  mkdir -p "$app/.tsbuildinfo"
  [ "$incremental" = 0 ] || [ ! -e "$kept" ] || cp "$kept" "$app/.tsbuildinfo/$resolution"
  typecheck "$app" "tsconfig.$resolution.json" || status=$?
  # A failed run keeps its state too: TypeScript records the errors in it and reports them again.
  if [ -e "$app/.tsbuildinfo/$resolution" ]; then
    cp "$app/.tsbuildinfo/$resolution" "$kept.$BASHPID" && mv -f "$kept.$BASHPID" "$kept"
  fi
  return "$status"
}
step "type-check: ${#apps[@]} toolchains x ${#MODES[@]} resolutions, $JOBS at a time (incremental: $incremental)"
# And per toolchain the experimentalDecorators app (nodenext; the libraries are checked above).
for app in "${apps[@]}"; do
  cat > "$app/tsconfig.legacy-decorators.json" <<'EOF'
{
  "compilerOptions": { "strict": true, "skipLibCheck": true, "noEmit": true, "experimentalDecorators": true, "target": "es2022", "types": ["node"], "module": "nodenext", "moduleResolution": "nodenext" },
  "include": ["src-legacy"]
}
EOF
  slot
  check "$(basename "$app")+legacy-decorators" typecheck "$app" tsconfig.legacy-decorators.json &
done
for app in "${apps[@]}"; do
  for mode in "${MODES[@]}"; do
    set -- $mode
    slot
    check "$(basename "$app")+$2" typecheck_cached "$app" "$2" &
  done
done
# The docs' blocks under `tsc --init`'s options, as a new project has them (target esnext,
# exactOptionalPropertyTypes, noUncheckedIndexedAccess, verbatimModuleSyntax, ...): each TypeScript's own
# `tsc --init` output, with the one edit its comments ask of a Node project ("types": ["node"]), in the app of
# that TypeScript with the newest @types/node of the matrix. Each compiles the blocks for esnext (as written)
# and for es2022 (what the pages say decorators, and `await using` before Node 24, need); the blocks then run
# from these builds below.
declare -A init_app=()
for app in "${apps[@]}"; do init_app[$(basename "${app%%+*}")]=$app; done
init_configs() {
  local app=$1 tmp target
  tmp=$(mktemp -d "$work/init.XXXXXX")
  (cd "$tmp" && node "$app/node_modules/typescript/bin/tsc" --init > /dev/null) || return 1
  sed -e 's/"types": \[\],/"types": ["node"],/' -e '0,/{/s//{\n  "include": ["src\/examples"],/' "$tmp/tsconfig.json" > "$app/tsconfig.init.json"
  grep -q '"types": \["node"\]' "$app/tsconfig.init.json" || fail "$(basename "$app"): tsc --init wrote no \"types\": [] to edit"
  echo '{ "extends": "./tsconfig.init.json", "compilerOptions": { "rootDir": "src/examples", "outDir": "out/esnext" } }' > "$app/tsconfig.init-esnext.json"
  # The same sources: the esnext build has type-checked them.
  echo '{ "extends": "./tsconfig.init.json", "compilerOptions": { "target": "es2022", "noCheck": true, "rootDir": "src/examples", "outDir": "out/es2022" } }' > "$app/tsconfig.init-es2022.json"
}
for ts in "${!init_app[@]}"; do
  init_configs "${init_app[$ts]}"
  for target in esnext es2022; do
    slot
    check "$ts+init-$target" typecheck "${init_app[$ts]}" "tsconfig.init-$target.json" &
  done
done
await_jobs || true
[ -z "$api_app" ] || cat "$work/results/exports-covered.log"

step "the quick start from the installed tarball on Node ${NODES[*]}"
read -r compiled _ < "$work/results/quickstart-compiles.result"
[ "$compiled" = pass ] || { cat "$work/results/quickstart-compiles.log" >&2; fail "examples/quickstart.ts does not compile"; }
deadline=$((SECONDS + 300))
until grep -q '^mysql://' "$work/db-url" 2>/dev/null; do
  kill -0 "$server_pid" 2>/dev/null && [ $SECONDS -lt $deadline ] || { cat "$work/server.log" >&2; fail "no database URL from scripts/scratch-database.ts"; }
  sleep 0.2
done
db_url=$(head -1 "$work/db-url")
tail -1 "$work/server.log"
run_quickstart() {
  local out
  out=$(cd "$quickstart" && MYSQL_URL=$db_url "$1" out/quickstart.js) || return 1
  echo "$out"
  grep -Eqx 'payment of 125\.00 on loan-42 committed under write grant [0-9]+' <<<"$out"
}
for major in "${NODES[@]}"; do
  check "quickstart+node@${version[node@$major]}" run_quickstart "$cache/node@${version[node@$major]}/node_modules/node/bin/node"
  cat "$work/results/quickstart+node@${version[node@$major]}.log"
done

step "the docs' blocks run against the server on Node ${NODES[*]} (.ci/consumer/run-blocks.mjs)"
# As compiled for esnext by the first TypeScript of the matrix; decorators and `await using` before Node 24
# also as compiled for es2022 by each.
blocks_ts=${TYPESCRIPT[0]}
blocks_app=${init_app[typescript@${version[typescript@$blocks_ts]}]}
# Every build runs from the one app, so that a block's imports and the harness's are the same modules.
lowered=()
for ts in "${!init_app[@]}"; do
  rm -rf "$blocks_app/out/es2022-$ts"
  cp -r "${init_app[$ts]}/out/es2022" "$blocks_app/out/es2022-$ts" 2>/dev/null || true
  lowered+=("out/es2022-$ts")
done
builds_ok=1
for result in "$work"/results/*+init-*.result; do
  read -r status _ < "$result"
  [ "$status" = pass ] || builds_ok=0
done
cp .ci/consumer/run-blocks.mjs "$blocks_app/"
run_blocks() { cd "$blocks_app" && MYSQL_URL=$db_url "$1" run-blocks.mjs src/examples out/esnext "$repo" "${lowered[@]}"; }
for major in "${NODES[@]}"; do
  name="docs-blocks+node@${version[node@$major]}"
  if [ "$builds_ok" = 1 ]; then
    check "$name" run_blocks "$cache/node@${version[node@$major]}/node_modules/node/bin/node"
    sed -n '/^docs blocks on /,$p' "$work/results/$name.log"
  else
    echo "not run: a tsc --init build of the blocks failed (results below)" > "$work/results/$name.log"
    echo "FAIL 0" > "$work/results/$name.result"
  fi
done
# Negative control: a block that compiles but writes a column no table has fails the run, and is named.
control() {
  local dir="$blocks_app/control"
  mkdir -p "$dir/src" "$dir/out"
  printf "import type { LockManager } from 'mysql-rwlock';\ndeclare const locks: LockManager;\n\nawait locks.withWriteLock('loan:loan-42', (trx) => trx('payments').insert({ loan_id: 'loan-42', amount: 125 }));\nexport {};\n" > "$dir/src/control-L1.ts"
  printf "await locks.withWriteLock('loan:loan-42', (trx) => trx('payments').insert({ loan_id: 'loan-42', amount: 125 }));\nexport {};\n" > "$dir/out/control-L1.js"
  local out status=0
  out=$(cd "$blocks_app" && MYSQL_URL=$db_url node run-blocks.mjs control/src control/out "$repo" "${lowered[@]}" 2>&1) || status=$?
  echo "$out" | sed -n '/^docs blocks on /,$p'
  [ "$status" = 1 ] && grep -q "^  FAIL      control-L1 .*Unknown column 'amount'" <<<"$out"
}
check "docs-blocks-control" control

# An application pinned to node-cron 3, as docs/jobs.md describes it: npm nests node-cron 4.6+ under
# the package (its own range), and the page's coordinator block, which every app above compiles, fails
# against the application's node-cron 3 and its @types/node-cron 3 (whose ScheduleOptions have no
# `distributed`), so the mismatch shows at build time rather than as a task that never runs.
cron3() {
  local app="$work/node-cron-3" block out
  block=$(grep -l "distributed: true" "$work/app-src/src/examples"/docs-jobs-L*.ts | head -1)
  [ -n "$block" ] || { echo "no docs/jobs.md block schedules a distributed task"; return 1; }
  mkdir -p "$app/src"
  cp "$block" "$app/src/"
  cd "$app" || return 1
  npm init -y > /dev/null && npm pkg set type=module || return 1
  quiet npm install --no-audit --no-fund --prefer-offline "$tarball" "knex@$(pkg peerDependencies.knex)" \
    "mysql2@$(pkg peerDependencies.mysql2)" node-cron@3 @types/node-cron@3 \
    "typescript@${version[typescript@${TYPESCRIPT[0]}]}" "@types/node@${version[@types/node@${TYPES_NODE[0]}]}" || return 1
  local mine nested
  mine=$(node -p "require('./node_modules/node-cron/package.json').version") || return 1
  nested=$(node -p "require('./node_modules/mysql-rwlock/node_modules/node-cron/package.json').version") || return 1
  echo "the application's node-cron: $mine; nested under mysql-rwlock: $nested"
  [[ $mine == 3.* && $nested =~ ^4\.([6-9]|[1-9][0-9])\. ]] || return 1
  echo '{ "compilerOptions": { "strict": true, "noEmit": true, "target": "es2022", "module": "nodenext", "moduleResolution": "nodenext", "types": ["node"] }, "include": ["src"] }' > tsconfig.json
  if out=$(node node_modules/typescript/bin/tsc -p tsconfig.json 2>&1); then
    echo "the coordinator block compiled against node-cron 3"
    return 1
  fi
  echo "$out"
  grep -q "'distributed' does not exist in type 'ScheduleOptions'" <<<"$out"
}
check "node-cron-3-pinned-fails-to-build" cron3

step "results"
failed=0
printf '%-70s %-6s %s\n' check result seconds
for result in "$work"/results/*.result; do
  name=$(basename "$result" .result)
  read -r status seconds < "$result"
  printf '%-70s %-6s %s\n' "$name" "$status" "$seconds"
  [ "$status" = pass ] || failed=$((failed + 1))
done
for result in "$work"/results/*.result; do
  read -r status _ < "$result"
  [ "$status" = pass ] && continue
  printf '\n--- %s\n' "$(basename "$result" .result)"
  head -60 "${result%.result}.log"
done
[ "$failed" -eq 0 ] || fail "$failed checks failed (above)"
echo "consumer-matrix passed in $((SECONDS - started))s"
