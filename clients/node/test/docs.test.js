// docs/clients-node.md's examples, run as pasted in a project made by
// `npm init -y` (CommonJS by default) into which the package is installed
// from its npm-packed tarball, as a published package would be. Each ```js
// block is a program: a file that uses require() is saved as .js, the
// others (ES modules) as .mjs, as the doc says. Only the addresses are
// replaced by the test's: 127.0.0.1:7379 (fencer), redis://localhost:6379,
// postgres://localhost/app. A later `npm install` of another package must
// leave the package working.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { fileScope, startFencerd, startPostgres, startRedis, tempDir } from './harness.js';

const here = dirname(fileURLToPath(import.meta.url));
const pkgDir = join(here, '..');
const doc = join(pkgDir, '..', '..', 'docs', 'clients-node.md');
const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
const lock = JSON.parse(readFileSync(join(pkgDir, 'package-lock.json'), 'utf8'));
// The versions the project installs beside the package: this package's pins.
const pinned = (name) => `${name}@${lock.packages[`node_modules/${name}`].version}`;

/** examples returns [line, code] of every ```js block of the doc. */
export function examples(text) {
  const out = [];
  for (const m of text.matchAll(/^```js\n([\s\S]*?)^```$/gm)) {
    out.push([text.slice(0, m.index).split('\n').length, m[1]]);
  }
  return out;
}

function run(cmd, args, cwd, timeout = 120_000) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout, env: process.env });
  if (r.error) throw r.error;
  return r;
}

function npm(args, cwd) {
  const r = run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], cwd, 300_000);
  assert.equal(r.status, 0, `npm ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

const scope = fileScope();
let project;
let subst;
before(async () => {
  const [d, redis, pgURL] = await Promise.all([startFencerd(scope), startRedis(scope), startPostgres(scope)]);
  subst = (code) => code
    .replaceAll('127.0.0.1:7379', d.addr)
    .replaceAll('redis://localhost:6379', `redis://${redis.addr}`)
    .replaceAll('postgres://localhost/app', pgURL);
  const packs = tempDir(scope, 'fencer-node-pack-');
  npm(['pack', '--pack-destination', packs], pkgDir);
  const [tgz] = readdirSync(packs).filter((f) => f.endsWith('.tgz'));
  assert.ok(tgz, 'npm pack wrote no tarball');
  project = tempDir(scope, 'fencer-node-project-');
  npm(['init', '-y'], project);
  assert.equal(JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')).type ?? 'commonjs', 'commonjs');
  npm(['install', join(packs, tgz), pinned('ioredis'), pinned('pg'), pinned('redlock')], project);
});
after(scope.cleanup);

function runExample(line, code) {
  const file = join(project, `example-line${line}.${/\brequire\(/.test(code) ? 'js' : 'mjs'}`);
  writeFileSync(file, subst(code));
  const r = run(process.execPath, [file], project, 60_000);
  assert.equal(r.status, 0, `docs/clients-node.md line ${line} (${file}):\n${code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  assert.ok(r.stdout.trim(), `docs/clients-node.md line ${line} printed nothing`);
  assert.doesNotMatch(r.stderr, /Warning/, `docs/clients-node.md line ${line} warned:\n${r.stderr}`);
  return r.stdout;
}

const text = readFileSync(doc, 'utf8');
const all = examples(text);

test('the doc has examples, one of them a CommonJS require', () => {
  assert.ok(all.length >= 8, `${all.length} examples`);
  assert.ok(all.some(([, c]) => /\brequire\('@fencer\/client'\)/.test(c)));
  assert.ok(all.some(([, c]) => /^import .* from '@fencer\/client';$/m.test(c)));
  assert.equal(pkg.engines.node, '>=20.19', 'engines: require() of an ES module works from Node 20.19');
});

for (const [line, code] of all) {
  test(`docs/clients-node.md line ${line} runs as pasted`, () => {
    console.log(`--- line ${line}:\n${runExample(line, code)}`);
  });
}

test('a later npm install of another package leaves the package working', () => {
  npm(['install', pinned('@types/pg')], project);
  for (const [line, code] of all.filter(([, c]) => /@fencer\/client/.test(c)).slice(0, 2)) runExample(line, code);
});
