/**
 * Points imports at files that moved (issue #9, item 4: the layering).
 * Code written against the old places (a branch merged after the moves)
 * keeps importing them; this rewrites every relative import under src/,
 * test/, bench/ and scripts/ whose target no longer exists but moved
 * (MOVES below) to where the file is now. Names that moved out of a file
 * that still exists (the splits below) are left to tsc to point out.
 *
 *   node scripts/fix-moved-imports.ts          rewrites, and lists what it changed
 *   node scripts/fix-moved-imports.ts --check  lists only
 *
 * Splits (names moved, the file stayed):
 * - src/http/modules/access.ts: Rule, addressBytes, parseRule, matches → src/core/inet.ts
 * - src/http/modules/ssl/conf.ts: SslSrvConf, PathValue, SessionCacheConf, VerifyMode → src/tls/server-conf.ts
 * - VariableDef's default host is VariableHost now: http code writes HttpVariable (src/http/http-conf.ts)
 */
import fs from 'node:fs';
import path from 'node:path';

/** Old path → new path, from the repository root; a folder ends with `/`. */
const MOVES: Array<[string, string]> = [
  ['src/http/modules/core/', 'src/http/core/'],
  ['src/http/modules/http2.ts', 'src/http/http2/module.ts'],
  ['src/core/master.ts', 'src/process/master.ts'],
  ['src/core/worker.ts', 'src/process/worker.ts'],
  ['src/http/variables.ts', 'src/core/variables.ts'],
  ['src/stream/proxy-protocol.ts', 'src/core/proxy-protocol.ts'],
  ['src/http/inet.ts', 'src/core/inet.ts'],
];

function moved(target: string): string | undefined {
  for (const [from, to] of MOVES) {
    if (from.endsWith('/') ? target.startsWith(from) : target === from) return to + target.slice(from.length);
  }
  return undefined;
}

const SPECIFIER = /((?:from|import)\s*\(?\s*)(['"])(\.\.?\/[^'"]+)\2/g;
const repo = path.resolve(import.meta.dirname, '..');
const check = process.argv.includes('--check');
let changes = 0;

function visit(dir: string): void {
  for (const entry of fs.readdirSync(path.join(repo, dir), { withFileTypes: true })) {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) visit(rel);
    else if (entry.name.endsWith('.ts')) fix(rel);
  }
}

function fix(file: string): void {
  const text = fs.readFileSync(path.join(repo, file), 'utf8');
  const out = text.replace(SPECIFIER, (whole, lead: string, quote: string, spec: string) => {
    const target = path.posix.join(path.posix.dirname(file), spec);
    if (fs.existsSync(path.join(repo, target))) return whole;
    const now = moved(target);
    if (!now || !fs.existsSync(path.join(repo, now))) return whole;
    let next = path.posix.relative(path.posix.dirname(file), now);
    if (!next.startsWith('.')) next = `./${next}`;
    console.log(`${file}: ${spec} → ${next}`);
    changes++;
    return `${lead}${quote}${next}${quote}`;
  });
  if (out !== text && !check) fs.writeFileSync(path.join(repo, file), out);
}

for (const root of ['src', 'test', 'bench', 'scripts']) if (fs.existsSync(path.join(repo, root))) visit(root);
console.log(`${changes} import${changes === 1 ? '' : 's'} ${check ? 'to change' : 'changed'}`);
