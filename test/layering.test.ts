// Imports flow one way: no file under src/ imports from a higher layer, and
// layers of one tier do not import each other in a circle. The layers are
// drawn in docs/architecture.md ("Layers") and mapped in test/layering/layers.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { apartProblems, circles, importsOf, layerProblems, readImports } from './layering/check.ts';
import { LAYERS, layerOf } from './layering/layers.ts';
import type { Layer } from './layering/layers.ts';

const REPO = path.resolve(import.meta.dirname, '..');
const TREE = readImports(REPO);

test('every import under src/ goes to the same layer or one below', () => {
  const { files, imports } = TREE;
  assert.ok(files.length > 100, `read ${files.length} files`);
  assert.ok(imports.length > 1000, `read ${imports.length} imports`);
  const problems = layerProblems(files, imports);
  assert.deepEqual(problems, [], `\n${problems.join('\n')}\n(layers: docs/architecture.md, map: test/layering/layers.ts)`);
});

test('stream imports nothing of http (what both use is in the core or src/upstream)', () => {
  const problems = apartProblems(TREE.imports);
  assert.deepEqual(problems, [], `\n${problems.join('\n')}\n(APART in test/layering/layers.ts)`);
  const added = importsOf('src/stream/modules/map.ts', "import { readMap } from '../../http/modules/map.ts';\nimport type { HttpRequest } from '../../http/request.ts';\n");
  assert.deepEqual(apartProblems(added), [
    'src/stream/modules/map.ts (stream modules) imports src/http/modules/map.ts (http modules): the subsystems stay apart',
    'src/stream/modules/map.ts (stream modules) imports src/http/request.ts (http engine): the subsystems stay apart',
  ]);
});

test('an engine file that imports a module is reported as upward', () => {
  const { files, imports } = TREE;
  const response = 'src/http/response.ts';
  const added = importsOf(response, "import { gzipModule } from './modules/gzip.ts';\nimport type { Rule } from '../core/inet.ts';\n");
  assert.deepEqual(layerProblems(files, [...imports, ...added]), [
    'src/http/response.ts (http engine) imports src/http/modules/gzip.ts (http modules): upward',
  ]);
});

test('type-only, export-from, import() and a worker URL count as imports', () => {
  const text = [
    "import type { HttpModule } from '../http/http-conf.ts';",
    "import {",
    "  type A,",
    "  type B,",
    "} from '../modules/a.ts';",
    "export { x } from './modules/x.ts';",
    "export type * from '../modules/y.ts';",
    "const later = () => import('../stream/modules/core.ts');",
    "const worker = new Worker(new URL('../process/worker.ts', import.meta.url));",
    "const data = new URL('./data.bin', base);",
    "const root = new URL('../..', import.meta.url);",
    "import fs from 'node:fs';",
    "// import { no } from '../modules/comment.ts';",
    "const s = \"import { no } from '../modules/string.ts'\";",
  ].join('\n');
  assert.deepEqual(importsOf('src/core/sample.ts', text), [
    { from: 'src/core/sample.ts', to: 'src/http/http-conf.ts', typeOnly: true },
    { from: 'src/core/sample.ts', to: 'src/modules/a.ts', typeOnly: true },
    { from: 'src/core/sample.ts', to: 'src/core/modules/x.ts', typeOnly: false },
    { from: 'src/core/sample.ts', to: 'src/modules/y.ts', typeOnly: true },
    { from: 'src/core/sample.ts', to: 'src/stream/modules/core.ts', typeOnly: false },
    { from: 'src/core/sample.ts', to: 'src/process/worker.ts', typeOnly: false },
  ]);
  const problems = layerProblems(['src/core/sample.ts'], importsOf('src/core/sample.ts', text));
  assert.deepEqual(problems, [
    'src/core/sample.ts (core) imports src/http/http-conf.ts (http engine): upward (type-only)',
    'src/core/sample.ts (core) imports src/modules/a.ts: outside every layer',
    'src/core/sample.ts (core) imports src/modules/y.ts: outside every layer',
    'src/core/sample.ts (core) imports src/stream/modules/core.ts (stream modules): upward',
    'src/core/sample.ts (core) imports src/process/worker.ts (program): upward',
  ]);
});

test('a circle between layers of one tier is reported, with one import per step', () => {
  const files = ['src/http/connection.ts', 'src/stream/conf.ts', 'src/stream/session.ts'];
  const imports = [
    ...importsOf('src/http/connection.ts', "import { readProxyProtocol } from '../stream/session.ts';"),
    ...importsOf('src/stream/conf.ts', "import { VariableRegistry } from '../http/variables.ts';"),
    ...importsOf('src/stream/session.ts', "import type { StreamConf } from './conf.ts';"),
  ];
  assert.deepEqual(layerProblems(files, imports), [
    'import cycle between layers http engine → stream engine → http engine: ' +
      'src/http/connection.ts imports src/stream/session.ts; src/stream/conf.ts imports src/http/variables.ts',
  ]);
});

test('a file in no layer is reported; the longest matching path decides', () => {
  assert.deepEqual(layerProblems(['src/unplaced/client.ts'], []), [
    'src/unplaced/client.ts: in no layer (add its folder to test/layering/layers.ts)',
  ]);
  const layers: Layer[] = [
    { name: 'engine', tier: 0, paths: ['src/http/'] },
    { name: 'modules', tier: 1, paths: ['src/http/modules/', 'test/modules/'] },
    { name: 'top', tier: 2, paths: ['src/modules.ts'] },
  ];
  assert.equal(layerOf('src/http/modules/gzip.ts', layers)?.name, 'modules');
  assert.equal(layerOf('src/http/upstream/engine.ts', layers)?.name, 'engine');
  assert.equal(layerOf('test/modules/seam.ts', layers)?.name, 'modules');
  assert.equal(layerOf('src/modules.ts', layers)?.name, 'top');
  assert.equal(layerOf('src/modules.tsx', layers), undefined);
});

test('docs/architecture.md names every layer of the map', () => {
  const doc = fs.readFileSync(path.join(REPO, 'docs/architecture.md'), 'utf8');
  const start = doc.indexOf('\n## Layers');
  assert.ok(start >= 0, 'docs/architecture.md has a "## Layers" section');
  const section = doc.slice(start, doc.indexOf('\n## ', start + 1));
  for (const layer of LAYERS) {
    assert.ok(section.includes(layer.name), `the Layers section names "${layer.name}"`);
    for (const p of layer.paths) assert.ok(section.includes(p.replace(/^src\//, '')), `the Layers section names ${p}`);
  }
});

test('the request path owns its objects: nothing under src/http imports node:http, only the HTTP/2 layer node:http2', () => {
  const dir = path.join(REPO, 'src/http');
  const offenders: string[] = [];
  for (const rel of fs.readdirSync(dir, { recursive: true }) as string[]) {
    if (!rel.endsWith('.ts')) continue;
    const text = fs.readFileSync(path.join(dir, rel), 'utf8');
    const file = `src/http/${rel}`;
    if (/from 'node:http'/.test(text)) offenders.push(`${file} imports node:http`);
    // grpc_pass's upstream side is node:http2's client session (the client side, not the request path)
    const h2Layer = file === 'src/http/http2.ts' || file.startsWith('src/http/http2/') || file === 'src/http/modules/grpc/request.ts';
    if (/from 'node:http2'/.test(text) && !h2Layer) offenders.push(`${file} imports node:http2 outside the HTTP/2 layer`);
    // node:http's private fields, read by the request path before it had its own objects
    if (/_httpMessage|kNeedDrain|_addHeaderLines|\._header\b/.test(text)) offenders.push(`${file} reads node:http's private fields`);
  }
  assert.deepEqual(offenders, []);
});

/** The files that import each other's values in circles (type-only imports leave no trace at run time). */
function valueCircles(imports: ReturnType<typeof readImports>['imports']): string[] {
  const next = new Map<string, string[]>();
  for (const i of imports) if (!i.typeOnly) next.set(i.from, [...(next.get(i.from) ?? []), i.to]);
  return circles([...next.keys()].sort(), (f) => next.get(f) ?? []).map((c) => [...c, c[0]].join(' → '));
}

test('no files under src/ import values from each other in a circle', () => {
  assert.deepEqual(valueCircles(TREE.imports), []);
  // the check sees one: the error log's syslog peer reading the main error log again
  const added = importsOf('src/core/access-log/syslog.ts', "import { mainErrorLog } from '../error-log.ts';\n");
  assert.deepEqual(valueCircles([...TREE.imports, ...added]), ['src/core/error-log.ts → src/core/access-log/syslog.ts → src/core/error-log.ts']);
});
