// Reference test: every configuration of the corpus goes through Debian's
// nginx 1.22 and through Gatehouse with the same command line
// (`-p DIR/ -c nginx.conf -e error.log -t` and variations); what a user sees
// must be the same: exit code, stderr, stdout (-T) and error.log, after
// replacing the prefix and the program name. Reference: nginx 1.22.1 as
// packaged by Debian (/usr/sbin/nginx).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nginxSkip } from '../kit/server.ts';
import { runCase } from './reference.ts';
import type { ConfCase } from './reference.ts';
import { syntaxCases } from './corpus-syntax.ts';
import { mainCases } from './corpus-main.ts';

const cases: ConfCase[] = [...syntaxCases, ...mainCases];

test('corpus names are unique', () => {
  assert.equal(new Set(cases.map((c) => c.name)).size, cases.length);
});

test('configuration errors and -t/-T output match nginx', { concurrency: 2 }, async (t) => {
  for (const c of cases) {
    if (c.gatehouseOnly) {
      const only = c.gatehouseOnly;
      void t.test(`${c.name} (gatehouse only: ${only.reason})`, async () => {
        const got = await runCase('gatehouse', c);
        assert.equal(got.stderr, only.stderr);
        assert.equal(got.code, only.code);
      });
      continue;
    }
    void t.test(c.name, { skip: nginxSkip }, async () => {
      const [want, got] = await Promise.all([runCase('nginx', c), runCase('gatehouse', c)]);
      assert.deepEqual(got, want);
    });
  }
});
