#!/usr/bin/env bash
# The package as a new user gets it: `npm pack`, then a scratch app in a temporary directory that
# installs the tarball as the README says, typechecks the README's quick start
# (examples/quickstart.ts) under moduleResolution nodenext, node16 and bundler, compiles and runs it
# against a real server, loads the package through require(), compiles the shipped NestJS example
# (examples/nestjs/) with experimentalDecorators and runs it, runs the installed reaper bin, and
# checks that every relative link in the packed Markdown resolves inside the package, and that the
# install pulls no ORM, NestJS, Express/Fastify or OpenTelemetry package (.ci/no-extra-packages.mjs).
# The server is MYSQL_URL if set (a user that may create databases), else one found the way the
# tests find one (scripts/scratch-database.ts). Needs the checkout's devDependencies (npm ci) and
# access to the npm registry. Usage: bash .ci/pack-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/mysql-rwlock-pack.XXXXXX")
server_pid=
reaper_pid=
cleanup() {
  [ -z "$reaper_pid" ] || kill -KILL "$reaper_pid" 2>/dev/null || true
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
started=$SECONDS
step() { printf '\n=== pack-check: %s (%ss)\n' "$1" "$((SECONDS - started))"; }
fail() { echo "pack-check FAILED: $*" >&2; exit 1; }
# Waits up to $2 seconds for file $1 to contain a line matching $3 (a condition, not a fixed sleep).
await_line() {
  local deadline=$((SECONDS + $2))
  until grep -q -- "$3" "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}
pkg() { node -p "require('$repo/package.json').$1"; }

step "a server"
node --import tsx scripts/scratch-database.ts > "$work/db-url" 2> "$work/server.log" &
server_pid=$!
await_line "$work/db-url" 300 '^mysql://' || { cat "$work/server.log" >&2; fail "no database URL from scripts/scratch-database.ts"; }
db_url=$(head -1 "$work/db-url")
tail -1 "$work/server.log"

step "npm pack"
# npm pack alone must build: prepare compiles a clean dist/ (its output is shown only if it fails).
npm pack --pack-destination "$work" > "$work/pack.log" 2>&1 || { cat "$work/pack.log" >&2; fail "npm pack failed"; }
tarball=$(ls "$work"/mysql-rwlock-*.tgz)
echo "$(basename "$tarball"):"
tar -tzvf "$tarball" | awk '{ print "  " $1 "  " $NF }' | sort -k2
files=$(tar -tzf "$tarball")
for required in package/package.json package/README.md package/LICENSE package/sql/schema.sql \
  package/dist/src/index.js package/dist/src/index.d.ts package/dist/src/observability/prometheus.js package/dist/migrations/index.js package/dist/jobs/reaper.js package/dist/src/cli/bin.js; do
  grep -qx "$required" <<<"$files" || fail "$required is not in the tarball"
done
if grep -Ev '^package/(package\.json|README\.md|LICENSE|CONTRIBUTING\.md|CHANGELOG\.md|examples/quickstart\.ts|examples/nestjs/[a-z.-]+\.ts|docs/.+\.(md|png|sql)|sql/[^/]+\.sql|dist/(src|migrations|jobs)/.+\.(js|d\.ts))$' <<<"$files"; then
  fail "the tarball holds files beyond what runs and its documentation (listed above)"
fi

step "every relative link in the packed Markdown resolves inside the package"
mkdir "$work/unpacked"
tar -xzf "$tarball" -C "$work/unpacked"
node scripts/check-links.mjs "$work/unpacked/package" || fail "broken links in the packed Markdown (listed above)"

step "a scratch app installs it"
app="$work/app"
mkdir "$app"
cd "$app"
npm init -y >/dev/null
npm pkg set type=module
# As the README says (npm install mysql-rwlock knex mysql2), with the peers' ranges from package.json.
npm install --no-audit --no-fund "$tarball" "knex@$(pkg peerDependencies.knex)" "mysql2@$(pkg peerDependencies.mysql2)"
node "$repo/.ci/no-extra-packages.mjs" . || fail "installing mysql-rwlock pulled an ORM, framework or OpenTelemetry package (listed above)"
ts_major=$(node -p "require('$repo/node_modules/typescript/package.json').version.split('.')[0]")
types_major=$(node -p "require('$repo/node_modules/@types/node/package.json').version.split('.')[0]")
npm install --no-audit --no-fund --save-dev "typescript@$ts_major" "@types/node@$types_major"
npm ls --depth=0
[ -x node_modules/mysql-rwlock/dist/jobs/reaper.js ] || fail "the reaper bin is not executable after install"
[ "$(head -1 node_modules/mysql-rwlock/dist/jobs/reaper.js)" = '#!/usr/bin/env node' ] || fail "the reaper bin has no #!/usr/bin/env node line"
[ -x node_modules/mysql-rwlock/dist/src/cli/bin.js ] || fail "the mysql-rwlock bin is not executable after install"
if grep -rn 'settleLostCommit\|markHead\|confirmLive\|static create' node_modules/mysql-rwlock/dist --include='*.d.ts'; then
  fail "@internal members are in the published declarations"
fi

step "neither a Grant nor a LockManager can be constructed by hand (both are exported as types only)"
printf "import { Grant, LockManager } from 'mysql-rwlock';\n// @ts-expect-error grants come from a LockManager\nnew Grant();\n// @ts-expect-error managers come from createLockManager\nnew LockManager({} as never);\n" > construct.ts
npx --no-install tsc --strict --noEmit --target es2022 --types node --module nodenext --moduleResolution nodenext construct.ts

step "the quick start typechecks (nodenext, node16, bundler)"
cp "$repo/examples/quickstart.ts" quickstart.ts
# The example imports the package by its name, as this app does: nothing to rewrite. Check that.
grep -q "^import { .* } from 'mysql-rwlock';$" quickstart.ts || fail "examples/quickstart.ts does not import from 'mysql-rwlock'"
tsc=(npx --no-install tsc --strict --noEmit --target es2022 --types node)
for mode in "nodenext nodenext" "node16 node16" "esnext bundler" "preserve bundler"; do
  set -- $mode
  echo "module $1, moduleResolution $2"
  "${tsc[@]}" --module "$1" --moduleResolution "$2" quickstart.ts
done

step "the quick start runs (compiled with tsc, run with node)"
npx --no-install tsc --strict --target es2022 --module nodenext --moduleResolution nodenext --types node --outDir out quickstart.ts
out=$(MYSQL_URL=$db_url node out/quickstart.js)
echo "$out"
grep -Eqx 'payment of 125\.00 on loan-42 committed under write grant [0-9]+' <<<"$out" || fail "unexpected quick start output"
if missing=$(env -u MYSQL_URL node out/quickstart.js 2>&1); then fail "the quick start ran without MYSQL_URL"; fi
echo "without MYSQL_URL: $missing"
[ "$(wc -l <<<"$missing")" -eq 1 ] || fail "without MYSQL_URL the quick start printed more than one line"

step "require() from CommonJS"
cat > check.cjs <<'EOF'
const knex = require('knex');
const { createLockManager, LockLostError } = require('mysql-rwlock');
const db = knex({ client: 'mysql2', connection: process.env.MYSQL_URL });
(async () => {
  const grant = await createLockManager({ knex: db }).tryAcquireWrite('cjs-check');
  console.log(`require('mysql-rwlock'): write grant ${grant.id} on cjs-check, released ${await grant.release()}; LockLostError is ${typeof LockLostError}`);
  await db.destroy();
})().catch((err) => { console.error(err); process.exit(1); });
EOF
MYSQL_URL=$db_url node check.cjs
node --input-type=module -e "
  import { LockLostError } from 'mysql-rwlock';
  import { createRequire } from 'node:module';
  const required = createRequire(import.meta.url)('mysql-rwlock');
  if (required.LockLostError !== LockLostError) { console.error('require() and import gave two copies'); process.exit(1); }
  console.log('import and require() give the same module: one copy of every class');"

step "mysql-rwlock/prometheus with prom-client, an optional peer (the entry above ran without it)"
npm install --no-audit --no-fund "prom-client@$(pkg "peerDependencies['prom-client']")"
cat > metrics.ts <<'EOF2'
import { Registry } from 'prom-client';
import { METRICS, registerLockMetrics } from 'mysql-rwlock/prometheus';
const registry = new Registry();
registerLockMetrics({ registry });
const text = await registry.metrics();
if (!text.includes(`# TYPE ${METRICS.acquireWait} histogram`)) throw new Error(`no ${METRICS.acquireWait} in the exposition`);
console.log(`import 'mysql-rwlock/prometheus': ${text.split('\n').filter((l) => l.startsWith('# TYPE')).length} metrics registered`);
EOF2
"${tsc[@]}" --module nodenext --moduleResolution nodenext metrics.ts
npx --no-install tsc --strict --target es2022 --module nodenext --moduleResolution nodenext --types node --outDir out metrics.ts
node out/metrics.js
node -e "const { registerLockMetrics } = require('mysql-rwlock/prometheus'); if (typeof registerLockMetrics !== 'function') process.exit(1); console.log(\"require('mysql-rwlock/prometheus'): registerLockMetrics is a function\")"

step "mysql-rwlock/otel with @opentelemetry/api, an optional peer"
npm install --no-audit --no-fund "@opentelemetry/api@$(pkg "peerDependencies['@opentelemetry/api']")"
cat > spans.ts <<'EOF2'
import { instrumentLocks, SPANS } from 'mysql-rwlock/otel';
const handle = instrumentLocks({ dbSystem: 'mysql' });
await handle.ready;
handle.disable();
console.log(`import 'mysql-rwlock/otel': instrumentLocks on and off, spans ${Object.values(SPANS).join(', ')}`);
EOF2
"${tsc[@]}" --module nodenext --moduleResolution nodenext spans.ts
npx --no-install tsc --strict --target es2022 --module nodenext --moduleResolution nodenext --types node --outDir out spans.ts
node out/spans.js
node -e "const { instrumentLocks } = require('mysql-rwlock/otel'); if (typeof instrumentLocks !== 'function') process.exit(1); console.log(\"require('mysql-rwlock/otel'): instrumentLocks is a function\")"

step "the NestJS example as shipped (examples/nestjs/): compiled with experimentalDecorators, run against the server"
npm install --no-audit --no-fund "@nestjs/common@$(pkg "peerDependencies['@nestjs/common']")" \
  "@nestjs/core@$(pkg "peerDependencies['@nestjs/core']")" reflect-metadata rxjs > nest-install.log 2>&1 \
  || { cat nest-install.log >&2; fail "npm install of NestJS"; }
mkdir nest
cp node_modules/mysql-rwlock/examples/nestjs/*.ts nest/
npx --no-install tsc --strict --target es2022 --module nodenext --moduleResolution nodenext --types node \
  --experimentalDecorators --outDir out/nest nest/*.ts
out=$(MYSQL_URL=$db_url node out/nest/main.js)
echo "$out"
grep -Eqx 'repaid 25\.00 on loan-7 under its write lock; balance now 975\.00' <<<"$out" || fail "unexpected output from the NestJS example"

step "the installed reaper bin"
node_modules/.bin/mysql-rwlock-reaper --help > help.txt
head -1 help.txt
grep -q '^Exit codes:' help.txt || fail "--help prints no exit codes"
MYSQL_URL=$db_url node_modules/.bin/mysql-rwlock-reaper --once
status=0; MYSQL_URL=$db_url REAPER_BATCH_SIZE=20000 node_modules/.bin/mysql-rwlock-reaper --once || status=$?
[ "$status" -eq 2 ] || fail "REAPER_BATCH_SIZE=20000 exited $status, not 2"
# The documented daemon command; SIGTERM must reach the reaper itself and end it.
MYSQL_URL=$db_url node node_modules/.bin/mysql-rwlock-reaper > reaper.log &
reaper_pid=$!
await_line reaper.log 60 '"event":"reaper.start"' || { cat reaper.log >&2; fail "the reaper logged no start line"; }
logged_pid=$(grep -o '"event":"reaper.start".*"pid":[0-9]*' reaper.log | grep -o '[0-9]*$')
[ "$logged_pid" = "$reaper_pid" ] || fail "the reaper runs as pid $logged_pid, not the started pid $reaper_pid"
kill -TERM "$reaper_pid"
status=0; wait "$reaper_pid" || status=$?
reaper_pid=
[ "$status" -eq 0 ] || fail "the reaper exited $status on SIGTERM"
! kill -0 "$logged_pid" 2>/dev/null || fail "the reaper (pid $logged_pid) still runs after SIGTERM"
grep -q '"event":"reaper.stop","signal":"SIGTERM"' reaper.log || fail "no stop line"
echo "node node_modules/.bin/mysql-rwlock-reaper: started as pid $logged_pid, SIGTERM ended it (exit 0)"

step "the installed mysql-rwlock CLI"
node_modules/.bin/mysql-rwlock --help > cli-help.txt
head -1 cli-help.txt
grep -q '^Exit codes:' cli-help.txt || fail "mysql-rwlock --help prints no exit codes"
for command in status ls inspect history release reap purge migrate; do
  node_modules/.bin/mysql-rwlock "$command" --help | grep -q "^Usage: mysql-rwlock $command" || fail "mysql-rwlock $command --help prints no usage"
done
status=0; node_modules/.bin/mysql-rwlock bogus 2>/dev/null || status=$?
[ "$status" -eq 2 ] || fail "mysql-rwlock bogus exited $status, not 2"
MYSQL_URL=$db_url node_modules/.bin/mysql-rwlock status --json | node -e "const s = JSON.parse(require('fs').readFileSync(0, 'utf8')); if (typeof s.live?.write !== 'number') process.exit(1)" \
  || fail "mysql-rwlock status --json printed no stats object"
echo "mysql-rwlock: --help for every command, exit 2 on an unknown command, status --json against the server"

step "pack-check passed"
