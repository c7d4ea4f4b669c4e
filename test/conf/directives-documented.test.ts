/**
 * Every directive a built-in module registers is documented in docs/: its
 * name starts a code span (`name args…`) somewhere in docs/*.md, as the
 * tables of docs/directives.md write them. A span whose first word holds
 * `*` (`*_hash_*`) covers the names it matches.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { modules } from '../../src/modules.ts';
import type { CycleModule } from '../../src/core/cycle.ts';

const DOCS = path.join(import.meta.dirname, '..', '..', 'docs');

function docsText(): string {
  return fs.readdirSync(DOCS).filter((f) => f.endsWith('.md')).map((f) => fs.readFileSync(path.join(DOCS, f), 'utf8')).join('\n');
}

/** The directive names `text` documents: the first word of each code span, and the patterns of those with `*`. */
function documentedNames(text: string): { names: Set<string>; patterns: RegExp[] } {
  const names = new Set<string>();
  const patterns: RegExp[] = [];
  for (const m of text.matchAll(/`([^`\n]+)`/g)) {
    const first = m[1].trim().split(/\s+/)[0];
    if (!/^[a-z0-9_*]+$/.test(first)) continue;
    if (first.includes('*')) patterns.push(new RegExp(`^${first.replaceAll('*', '[a-z0-9_]*')}$`));
    else names.add(first);
  }
  return { names, patterns };
}

/** `module: directive` for each directive of `mods` that `text` does not document. */
function undocumented(mods: readonly CycleModule[], text: string): string[] {
  const { names, patterns } = documentedNames(text);
  const missing: string[] = [];
  for (const m of mods) {
    for (const d of m.directives ?? []) {
      if (names.has(d.name) || patterns.some((p) => p.test(d.name))) continue;
      missing.push(`${m.name}: ${d.name}`);
    }
  }
  return missing;
}

test('every registered directive is documented in docs/', () => {
  const missing = undocumented(modules, docsText());
  assert.deepEqual(missing, [], `directives missing from docs/ (add them to docs/directives.md):\n  ${missing.join('\n  ')}`);
});

test('the check names a directive the docs do not have', () => {
  const fake = {
    name: 'ngx_http_fake_module',
    directives: [
      { name: 'fake_documented', contexts: 0, args: 1, handler: () => undefined },
      { name: 'fake_missing', contexts: 0, args: 1, handler: () => undefined },
      { name: 'fake_hash_max_size', contexts: 0, args: 1, handler: () => undefined },
    ],
  } as CycleModule;
  const text = '| `fake_documented value` | notes |\n| `fake_*_size` | accepted |\nfake_missing in plain text does not count';
  assert.deepEqual(undocumented([fake], text), ['ngx_http_fake_module: fake_missing']);
});
