// The modules under src/ import each other without a cycle: each imports
// only modules below itself. A cycle that works by the order of evaluation
// breaks when an entry point changes, so it is refused here.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const src = join(dirname(fileURLToPath(import.meta.url)), '..', 'src');

/** localImports lists the ./x.js modules a source file imports, statically
 * (import ... from, export ... from) or dynamically (import('./x.js')). */
export function localImports(text) {
  const out = new Set();
  const re = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"]\.\/([\w.-]+\.js)['"]/g;
  for (const m of text.matchAll(re)) out.add(m[1]);
  return [...out];
}

/** cycles returns every import cycle of graph (module -> imports), each as
 * the list of modules along it. */
export function cycles(graph) {
  const found = [];
  const state = new Map(); // 1: on the path, 2: done
  const path = [];
  const visit = (m) => {
    state.set(m, 1);
    path.push(m);
    for (const d of graph.get(m) ?? []) {
      if (state.get(d) === 1) found.push([...path.slice(path.indexOf(d)), d]);
      else if (!state.has(d)) visit(d);
    }
    path.pop();
    state.set(m, 2);
  };
  for (const m of [...graph.keys()].sort()) if (!state.has(m)) visit(m);
  return found;
}

test('the cycle check finds a cycle', () => {
  const g = new Map([['a.js', ['b.js']], ['b.js', ['c.js']], ['c.js', ['a.js']], ['d.js', ['a.js']]]);
  assert.deepEqual(cycles(g), [['a.js', 'b.js', 'c.js', 'a.js']]);
  assert.deepEqual(localImports("import { x } from './a.js';\nexport { y } from \"./b.js\";\nawait import('./c.js');"),
    ['a.js', 'b.js', 'c.js']);
});

test('src/ has no import cycle', () => {
  const graph = new Map();
  for (const f of readdirSync(src).filter((f) => f.endsWith('.js'))) {
    graph.set(f, localImports(readFileSync(join(src, f), 'utf8')));
  }
  assert.ok(graph.get('lease.js')?.length > 0, 'the imports of lease.js were not found');
  assert.deepEqual(cycles(graph), []);
});
