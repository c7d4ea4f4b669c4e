// nginx's `env` directive: what a worker's environment holds. No client can
// see a worker's environment until the Lua module (os.getenv) lands, so this
// checks the environment the master hands to its workers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Cycle, resolvePaths } from '../../src/core/cycle.ts';
import { workerEnv } from '../../src/process/worker-thread.ts';
import { modules } from '../../src/modules.ts';

function load(conf: string): Cycle {
  const paths = resolvePaths('/nonexistent/', 'nginx.conf');
  return Cycle.load(modules, { paths, readFile: (f) => (f === paths.confFile ? conf : '') });
}

test('workers get TZ and the variables `env` names, nothing else (ngx_set_environment)', () => {
  process.env.GH_KEPT = 'kept';
  process.env.GH_DROPPED = 'dropped';
  process.env.TZ = 'UTC';
  const env = workerEnv(load('env GH_KEPT; env GH_SET=a=b; env GH_ABSENT; events {}\n'));
  assert.deepEqual(env, { TZ: 'UTC', GH_KEPT: 'kept', GH_SET: 'a=b' });
  assert.deepEqual(workerEnv(load('events {}\n')), { TZ: 'UTC' });
  // `env TZ=…` overrides the inherited TZ
  assert.deepEqual(workerEnv(load('env TZ=Europe/Paris; events {}\n')), { TZ: 'Europe/Paris' });
});
