// npm test: runs the test files with node:test against real processes.
// fencerd comes from $FENCERD; if unset, it is built once here with
// `go build` at the repository root, into a temporary directory removed at
// the end.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const env = { ...process.env };
let built;
if (!env.FENCERD) {
  let root = here;
  while (!existsSync(join(root, 'go.mod'))) {
    const up = dirname(root);
    if (up === root) {
      console.error('FENCERD is not set and no go.mod was found above clients/node to build fencerd from');
      process.exit(1);
    }
    root = up;
  }
  built = mkdtempSync(join(tmpdir(), 'fencer-node-test-'));
  env.FENCERD = join(built, 'fencerd');
  console.log(`building fencerd (go build ./cmd/fencerd in ${root}); set FENCERD to skip this`);
  const b = spawnSync('go', ['build', '-o', env.FENCERD, './cmd/fencerd'], { cwd: root, stdio: 'inherit' });
  if (b.error || b.status !== 0) {
    console.error(`building fencerd failed (${b.error?.message ?? `exit ${b.status}`}); it needs Go (apt-get install golang-go), or set FENCERD`);
    rmSync(built, { recursive: true, force: true });
    process.exit(1);
  }
} else {
  env.FENCERD = resolve(env.FENCERD);
}

const files = process.argv.length > 2
  ? process.argv.slice(2)
  : readdirSync(here).filter((f) => f.endsWith('.test.js')).sort().map((f) => join(here, f));
// One file at a time: the files start servers on ports that were free a
// moment before, and their timing margins assume a machine not busy with
// the other files.
const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...files], { env, stdio: 'inherit' });
if (built) rmSync(built, { recursive: true, force: true });
process.exit(r.status ?? 1);
