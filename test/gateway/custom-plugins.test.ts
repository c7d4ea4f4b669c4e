/**
 * Custom plugins from `gatehouse.plugins_dir`: a TypeScript file with the
 * built-in plugins' shape is listed by the Admin API, its schema checks
 * route configurations with APISIX's messages, and its phase functions run
 * on the request path; a file that is not a plugin is left out with the
 * reason in the error log, and the others still load.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { defaultYaml, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let origin: Origin;

const GREETER = `
interface Conf { greeting: string; block_header?: string }
const plugin = {
  name: 'greeter',
  priority: 1234,
  schema: {
    type: 'object',
    properties: { greeting: { type: 'string', minLength: 1 }, block_header: { type: 'string' } },
    required: ['greeting'],
  },
  access(conf: Conf, ctx: { header(n: string): string | undefined; setRequestHeader(n: string, v: string): void }) {
    if (conf.block_header && ctx.header(conf.block_header) !== undefined) return { status: 403, body: { message: 'blocked by greeter' } };
    ctx.setRequestHeader('X-Greeting', conf.greeting);
    return undefined;
  },
  headerFilter(conf: Conf, ctx: { setResponseHeader(n: string, v: string): void }) {
    ctx.setResponseHeader('X-Greeted', conf.greeting);
  },
};
export default plugin;
`;

before(async () => {
  origin = await startOrigin();
  const prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-custom-plugins-'));
  fs.mkdirSync(path.join(prefix, 'plugins'));
  fs.writeFileSync(path.join(prefix, 'plugins', 'greeter.ts'), GREETER);
  fs.writeFileSync(path.join(prefix, 'plugins', 'broken.js'), 'export default { name: "Broken Name", priority: 1, schema: {} };\n');
  fs.writeFileSync(path.join(prefix, 'plugins', 'README.txt'), 'not a plugin\n');
  gw = await startGateway({ prefix, yaml: `${defaultYaml(1)}gatehouse:\n  plugins_dir: plugins\n` });
});

after(async () => {
  await gw?.stop();
  await origin?.close();
});

test('a custom plugin is listed, and its schema checks route configurations', async () => {
  const list = await gw.admin('GET', '/gateway/admin/plugins/list');
  assert.ok((list.json as string[]).includes('greeter'), list.text);
  assert.ok(!(list.json as string[]).some((n) => /broken/i.test(n)));
  const schema = await gw.admin('GET', '/gateway/admin/plugins/greeter');
  assert.equal(schema.status, 200);
  assert.deepEqual((schema.json as { required: string[] }).required, ['greeting']);
  const bad = await gw.admin('PUT', '/gateway/admin/routes/1', {
    uri: '/hello', plugins: { greeter: {} }, upstream: { type: 'roundrobin', nodes: { [origin.node]: 1 } },
  });
  assert.equal(bad.status, 400);
  assert.deepEqual(bad.json, { error_msg: 'failed to check the configuration of plugin greeter err: property "greeting" is required' });
});

test("a custom plugin's phase functions run on the request path", async () => {
  await put(gw, 'routes/1', {
    uri: '/hello', plugins: { greeter: { greeting: 'hi there', block_header: 'X-Block' } },
    upstream: { type: 'roundrobin', nodes: { [origin.node]: 1 } },
  });
  const r = await untilRouted(gw, '/hello', (x) => x.status === 200);
  assert.equal(r.echo?.headers['x-greeting'], 'hi there');
  assert.equal(r.headers['x-greeted'], 'hi there');
  const blocked = await proxy(gw, '/hello', { headers: { 'X-Block': '1' } });
  assert.equal(blocked.status, 403);
  assert.equal(blocked.body, '{"message":"blocked by greeter"}\n');
});

test('a file that is not a plugin is left out with the reason in the error log', () => {
  const log = fs.readFileSync(path.join(gw.prefix, 'logs', 'error.log'), 'utf8');
  assert.match(log, /\[error\] .*failed to load plugin .*broken\.js: `name` must be a plugin name/);
  assert.doesNotMatch(log, /README/);
});
