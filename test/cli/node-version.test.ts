// bin/gatehouse without the pinned Node (no `npm ci` yet): the node on PATH
// must be 24 or later, and an older one is named plainly instead of failing
// on a syntax error inside the sources.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const script = path.resolve(import.meta.dirname, '../../bin/gatehouse');

/** A checkout with bin/gatehouse and no node_modules, and a fake `node` of the given version on PATH. */
function checkoutWithNode(version: string | undefined): { bin: string; pathEnv: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-node-'));
  fs.mkdirSync(path.join(dir, 'bin'));
  fs.copyFileSync(script, path.join(dir, 'bin/gatehouse'));
  fs.chmodSync(path.join(dir, 'bin/gatehouse'), 0o755);
  const tools = path.join(dir, 'tools');
  fs.mkdirSync(tools);
  // the script needs dirname, id, mkdir…: link the system's, but no node of its own
  for (const t of ['dirname', 'id', 'mkdir', 'sh']) {
    const found = ['/usr/bin', '/bin'].map((d) => path.join(d, t)).find((p) => fs.existsSync(p));
    if (found) fs.symlinkSync(found, path.join(tools, t));
  }
  if (version !== undefined) {
    const major = version.slice(1).split('.')[0];
    fs.writeFileSync(path.join(tools, 'node'),
      `#!/bin/sh\ncase "$1" in -p) echo ${major};; --version) echo ${version};; *) echo ran "$@";; esac\n`, { mode: 0o755 });
  }
  return { bin: path.join(dir, 'bin/gatehouse'), pathEnv: tools };
}

test('an old node on PATH is refused with a plain message naming it', () => {
  const { bin, pathEnv } = checkoutWithNode('v20.11.1');
  const r = spawnSync(bin, ['-v'], { env: { PATH: pathEnv, HOME: os.tmpdir() }, encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, /^gatehouse: Node\.js 24 or later is required, but \S+\/node is v20\.11\.1; run `npm ci` in \S+ to install Node 24\n$/);
});

test('no node at all is refused with a plain message', () => {
  const { bin, pathEnv } = checkoutWithNode(undefined);
  const r = spawnSync(bin, ['-v'], { env: { PATH: pathEnv, HOME: os.tmpdir() }, encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /^gatehouse: Node\.js 24 or later is required and none was found; run `npm ci`/);
});

test('a node 24 on PATH is used when npm ci has not run', () => {
  const { bin, pathEnv } = checkoutWithNode('v24.3.0');
  const r = spawnSync(bin, ['-v'], { env: { PATH: pathEnv, HOME: os.tmpdir() }, encoding: 'utf8' });
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^ran .*src\/cli\/main\.ts -v\n$/);
});
