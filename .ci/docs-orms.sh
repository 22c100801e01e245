#!/usr/bin/env bash
# docs/orms.md as a reader uses it: a new app installs the packed package with knex, mysql2 and the
# ORMs at the versions the checkout's tests ran (read from its node_modules), takes the page's code
# as written (.ci/docs-orms.mjs: every ```ts block a module, the ```prisma block its schema), generates
# the Prisma client from that schema, type-checks and compiles everything with tsc (strict, nodenext),
# and runs each recipe (its connect(url) and repay(...)) once against a server with node. Fails if a
# block does not compile or a recipe does not record its payment. The server is MYSQL_URL if set, else
# one found as the tests find one (scripts/scratch-database.ts). Needs the checkout's devDependencies
# (npm ci) and the npm registry. Usage: bash .ci/docs-orms.sh [mysql-rwlock-x.y.z.tgz]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/mysql-rwlock-docs-orms.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
started=$SECONDS
step() { printf '\n=== docs-orms: %s (%ss)\n' "$1" "$((SECONDS - started))"; }
fail() { echo "docs-orms FAILED: $*" >&2; exit 1; }
installed() { node -p "require('$repo/node_modules/$1/package.json').version"; }
ORMS=(prisma @prisma/client @prisma/adapter-mariadb typeorm sequelize drizzle-orm kysely @mikro-orm/core @mikro-orm/mysql)

step "a server"
node --import tsx scripts/scratch-database.ts > "$work/db-url" 2> "$work/server.log" &
server_pid=$!

step "the package"
if [ $# -gt 0 ]; then
  tarball=$(realpath "$1")
else
  npm pack --pack-destination "$work" > "$work/pack.log" 2>&1 || { cat "$work/pack.log" >&2; fail "npm pack"; }
  tarball=$(ls "$work"/mysql-rwlock-*.tgz)
fi
echo "$(basename "$tarball")"

step "a new app: the package, knex, mysql2 and the ORMs the tests ran"
app="$work/app"
mkdir "$app"
cd "$app"
npm init -y > /dev/null
npm pkg set type=module
specs=("$tarball" "knex@$(installed knex)" "mysql2@$(installed mysql2)")
for orm in "${ORMS[@]}"; do specs+=("$orm@$(installed "$orm")"); done
specs+=("typescript@$(installed typescript)" "@types/node@$(installed @types/node)")
echo "${specs[*]:1}"
npm install --no-audit --no-fund --prefer-offline "${specs[@]}" > npm.log 2>&1 || { cat npm.log >&2; fail "npm install"; }

step "the page's code, as written"
tar -xzf "$tarball" -C "$work" package/docs/orms.md
mapfile -t runnable < <(node "$repo/.ci/docs-orms.mjs" "$work/package/docs/orms.md" "$app")
ls src
[ ${#runnable[@]} -eq 8 ] || fail "expected 8 recipes with connect() and repay(), found ${#runnable[@]}: ${runnable[*]}"
[ -e src/schema.prisma ] || fail "no prisma schema on the page"

step "prisma generate from the page's schema"
# As test/orm/prisma.test.ts: generate never runs the schema engine, which npm did not install.
PRISMA_SCHEMA_ENGINE_BINARY=src/schema.prisma CHECKPOINT_DISABLE=1 PRISMA_HIDE_UPDATE_MESSAGE=1 \
  npx --no-install prisma generate --schema src/schema.prisma

step "type-check and compile under tsc --init's options, TypeScript $(installed typescript) and the newest 7"
# As a new project has them (exactOptionalPropertyTypes, noUncheckedIndexedAccess, verbatimModuleSyntax,
# skipLibCheck, target esnext, ...), with the one edit their comments ask of a Node project ("types": ["node"]).
npm install --prefix "$work/ts7" --no-audit --no-fund --prefer-offline 'typescript@^7' > "$work/ts7.log" 2>&1 || { cat "$work/ts7.log" >&2; fail "npm install typescript@^7"; }
for tsc in node_modules/typescript/bin/tsc "$work/ts7/node_modules/typescript/bin/tsc"; do
  rm -f tsconfig.json
  node "$tsc" --init > /dev/null
  sed -i -e 's/"types": \[\],/"types": ["node"],/' -e '0,/{/s//{\n  "include": ["src"],/' tsconfig.json
  grep -q '"types": \["node"\]' tsconfig.json || fail "$tsc --init wrote no \"types\": [] to edit"
  echo "TypeScript $(node "$tsc" --version)"
  node "$tsc" -p tsconfig.json --noEmit || fail "the page's code does not compile with TypeScript $(node "$tsc" --version)'s tsc --init options"
done
echo '{ "extends": "./tsconfig.json", "compilerOptions": { "rootDir": "src", "outDir": "out" } }' > tsconfig.build.json
npx --no-install tsc -p tsconfig.build.json || fail "the page's code does not compile"

step "the skipLibCheck note: which packages' own declarations fail without it"
# docs/orms.md says so: drizzle-orm's alone under plain strict, and @mikro-orm/core's and sequelize's as well
# under tsc --init's other options (exactOptionalPropertyTypes).
failing() { npx --no-install tsc -p "$1" --noEmit --skipLibCheck false | grep -oE '^node_modules/(@[^/]+/)?[^/(]+' | sed 's|^node_modules/||' | sort -u | paste -sd ' ' || true; }
echo '{ "compilerOptions": { "strict": true, "types": ["node"], "module": "nodenext", "moduleResolution": "nodenext", "noEmit": true }, "include": ["src"] }' > tsconfig.strict.json
strict=$(failing tsconfig.strict.json)
echo "strict: ${strict:-none}"
[ "$strict" = drizzle-orm ] || fail "under strict, expected drizzle-orm's declarations alone to fail, found: ${strict:-none}"
init=$(failing tsconfig.json)
echo "tsc --init's options: ${init:-none}"
[ "$init" = "@mikro-orm/core drizzle-orm sequelize" ] || fail "under tsc --init's options, expected @mikro-orm/core, drizzle-orm and sequelize, found: ${init:-none}"

step "each recipe run with node"
deadline=$((SECONDS + 300))
until grep -q '^mysql://' "$work/db-url" 2>/dev/null; do
  kill -0 "$server_pid" 2>/dev/null && [ $SECONDS -lt $deadline ] || { cat "$work/server.log" >&2; fail "no database URL"; }
  sleep 0.2
done
db_url=$(head -1 "$work/db-url")
# The lock's tables, and the page's business tables from its ```sql block.
sql=$(awk '/^```sql$/ { on = 1; next } /^```$/ { on = 0 } on' "$work/package/docs/orms.md")
MYSQL_URL=$db_url node --input-type=module -e "
  import knex from 'knex';
  import { migrate } from 'mysql-rwlock/admin';
  const db = knex({ client: 'mysql2', connection: { uri: process.env.MYSQL_URL, multipleStatements: true } });
  await migrate(db);
  await db.raw(process.argv[1]);
  await db.destroy();" "$sql"
for name in "${runnable[@]}"; do
  out=$(MYSQL_URL=$db_url node "out/$name.js") || fail "$name exited $?"
  echo "$out"
  [ "$out" = "$name: repaid 125" ] || fail "$name printed '$out', not '$name: repaid 125'"
done

step "passed"
