#!/usr/bin/env bash
# The package installed from git, as `npm install github:<owner>/mysql-rwlock` does: a clone of the
# checkout's HEAD (committed work only) installed by its git+file:// URL into a scratch app. npm clones
# it, installs its devDependencies, runs `prepare` (the build) and packs it, so the app must then find
# every file the package's `exports` and `bin` name, import and require() the main entry, and run both
# bins. Needs access to the npm registry. Usage: bash .ci/git-install.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/mysql-rwlock-git.XXXXXX")
trap 'rm -rf "$work"' EXIT
started=$SECONDS
step() { printf '\n=== git-install: %s (%ss)\n' "$1" "$((SECONDS - started))"; }
fail() { echo "git-install FAILED: $*" >&2; exit 1; }

step "a clone of HEAD ($(git rev-parse --short HEAD))"
git clone --quiet --no-hardlinks "$PWD" "$work/mysql-rwlock"
[ ! -e "$work/mysql-rwlock/dist" ] || fail "the clone holds a dist/: the check would prove nothing"

step "the README's install line, with the clone's URL and HEAD, in a scratch app"
# The one ```sh line of the README's "## Install" section, its placeholder URL and ref replaced.
line=$(awk '/^## Install$/ { on = 1; next } /^## / { on = 0 } on && /^```sh$/ { block = 1; next } block && /^```$/ { exit } block' README.md)
[ "$(wc -l <<<"$line")" = 1 ] || fail "the README's Install section has not exactly one line in its sh block: $line"
placeholder='git+https://…/mysql-rwlock.git#<ref>'
[[ $line == "npm install $placeholder "* ]] || fail "the README's install line is not 'npm install $placeholder …': $line"
read -ra args <<<"${line#"npm install $placeholder "}"
echo "npm install git+file://$work/mysql-rwlock#$(git rev-parse HEAD) ${args[*]}"
mkdir "$work/app"
cd "$work/app"
npm init -y > /dev/null
npm pkg set type=module
npm install --no-audit --no-fund --prefer-offline "git+file://$work/mysql-rwlock#$(git -C "$work/mysql-rwlock" rev-parse HEAD)" "${args[@]}" > npm.log 2>&1 \
  || { cat npm.log >&2; fail "npm install from git"; }
npm ls --depth=0

step "every file of exports and bin is there; import, require() and the bins work"
node -e '
  const { existsSync } = require("fs");
  const pkg = require("mysql-rwlock/package.json");
  const targets = [...Object.values(pkg.bin), ...Object.values(pkg.exports).flatMap((t) => (typeof t === "string" ? [t] : Object.values(t)))];
  const missing = [...new Set(targets)].filter((t) => !existsSync(`node_modules/mysql-rwlock/${t}`));
  if (missing.length) { console.error(`missing after a git install: ${missing.join(", ")}`); process.exit(1); }
  console.log(`${new Set(targets).size} files named by exports and bin: all present`);' || fail "files missing"
node --input-type=module -e "
  import { createLockManager } from 'mysql-rwlock';
  import { migrate } from 'mysql-rwlock/admin';
  import { fromKnex } from 'mysql-rwlock/adapters';
  for (const f of [createLockManager, migrate, fromKnex]) if (typeof f !== 'function') process.exit(1);
  console.log('import: mysql-rwlock, mysql-rwlock/admin and mysql-rwlock/adapters load');" || fail "import"
node -e "if (typeof require('mysql-rwlock').createLockManager !== 'function') process.exit(1); console.log('require(): mysql-rwlock loads')" \
  || fail "require()"
node_modules/.bin/mysql-rwlock --help | head -1
node_modules/.bin/mysql-rwlock-reaper --help | head -1

step "passed"
