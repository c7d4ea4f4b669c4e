/**
 * Reads the import graph of the source tree and checks it against the
 * layer map (layers.ts): no file imports from a higher layer, and layers
 * of one tier do not import each other in a circle. Type-only imports
 * count: they are how an engine comes to depend on a module's shapes.
 *
 * Run it to see the graph: `node test/layering/check.ts` prints the
 * imports between layers and any problem; `--cycles` adds the circles of
 * files inside each layer (allowed, but worth knowing), `--files` their
 * members.
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { APART, LAYERS, layerOf, ROOTS } from './layers.ts';
import type { Layer } from './layers.ts';

/** One import: files as paths from the repository root, with `/`. */
export interface Import {
  from: string;
  to: string;
  typeOnly: boolean;
}

/**
 * The relative imports of one file: `import … from`, `export … from`,
 * `import('…')` with a string literal, and `new URL('…', import.meta.url)`
 * (how a worker thread's entry is named). Packages and `node:` modules are
 * outside the layers and left out.
 */
export function importsOf(file: string, text: string): Import[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: Import[] = [];
  const add = (spec: string, typeOnly: boolean) => {
    if (!spec.startsWith('./') && !spec.startsWith('../')) return;
    found.push({ from: file, to: path.posix.join(path.posix.dirname(file), spec), typeOnly });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, isTypeOnlyImport(node.importClause));
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, node.isTypeOnly);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const arg = node.arguments[0];
      if (arg && ts.isStringLiteralLike(arg)) add(arg.text, false);
    } else if (isModuleUrl(node)) {
      add(node.arguments[0].text, false);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** `new URL('./file.ts', import.meta.url)`: a module loaded by URL (a worker thread's entry); not a folder or data file. */
function isModuleUrl(node: ts.Node): node is ts.NewExpression & { arguments: ts.NodeArray<ts.Expression> & [ts.StringLiteralLike, ...ts.Expression[]] } {
  if (!ts.isNewExpression(node) || !ts.isIdentifier(node.expression) || node.expression.text !== 'URL') return false;
  const [spec, base] = node.arguments ?? [];
  const isImportMetaUrl = base !== undefined && ts.isPropertyAccessExpression(base) && base.name.text === 'url' && ts.isMetaProperty(base.expression);
  return spec !== undefined && ts.isStringLiteralLike(spec) && /\.[cm]?[jt]s$/.test(spec.text) && isImportMetaUrl;
}

/** `import type {…}`, or `import { type A, type B }` where every name is a type. */
function isTypeOnlyImport(clause: ts.ImportClause | undefined): boolean {
  if (!clause) return false;
  if (clause.isTypeOnly) return true;
  const names = clause.namedBindings;
  return !clause.name && names !== undefined && ts.isNamedImports(names) && names.elements.length > 0 && names.elements.every((e) => e.isTypeOnly);
}

/** Every TypeScript file under `roots` (relative to `repo`), with its imports. */
export function readImports(repo: string, roots: readonly string[] = ROOTS): { files: string[]; imports: Import[] } {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(repo, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.ts')) files.push(rel);
    }
  };
  for (const root of roots) walk(root);
  files.sort();
  const imports = files.flatMap((f) => importsOf(f, fs.readFileSync(path.join(repo, f), 'utf8')));
  return { files, imports };
}

function describe(file: string, layers: readonly Layer[]): string {
  return `${file} (${layerOf(file, layers)?.name ?? 'no layer'})`;
}

/**
 * What breaks the layering, one message per problem: a file no rule
 * names, an import upward, and each circle of imports between layers of
 * one tier (naming one import per step).
 */
export function layerProblems(files: readonly string[], imports: readonly Import[], layers: readonly Layer[] = LAYERS): string[] {
  const problems: string[] = [];
  for (const f of files) if (!layerOf(f, layers)) problems.push(`${f}: in no layer (add its folder to test/layering/layers.ts)`);
  // between layers of one tier: the first import seen for each pair, to show where a circle runs
  const across = new Map<Layer, Map<Layer, Import>>();
  for (const imp of imports) {
    const from = layerOf(imp.from, layers);
    const to = layerOf(imp.to, layers);
    if (!from) continue;
    if (!to) {
      problems.push(`${imp.from} (${from.name}) imports ${imp.to}: outside every layer`);
      continue;
    }
    if (to.tier > from.tier) {
      problems.push(`${describe(imp.from, layers)} imports ${describe(imp.to, layers)}: upward${imp.typeOnly ? ' (type-only)' : ''}`);
    } else if (to.tier === from.tier && to !== from) {
      let out = across.get(from);
      if (!out) across.set(from, (out = new Map()));
      if (!out.has(to)) out.set(to, imp);
    }
  }
  for (const circle of circles(layers, (l) => [...(across.get(l)?.keys() ?? [])])) {
    const steps = circle.map((l, i) => across.get(l)!.get(circle[(i + 1) % circle.length])!);
    problems.push(`import cycle between layers ${circle.map((l) => l.name).join(' → ')} → ${circle[0].name}: ${steps.map((s) => `${s.from} imports ${s.to}`).join('; ')}`);
  }
  return problems;
}

/**
 * The circles of a graph: for each strongly connected part of more than
 * one node, one path through it that comes back to its start.
 */
export function circles<T>(nodes: readonly T[], next: (node: T) => readonly T[]): T[][] {
  return connectedParts(nodes, next).map((part) => pathThrough(part, next));
}

/** The strongly connected parts of more than one node (Tarjan's algorithm). */
export function connectedParts<T>(nodes: readonly T[], next: (node: T) => readonly T[]): T[][] {
  const index = new Map<T, number>();
  const low = new Map<T, number>();
  const stack: T[] = [];
  const onStack = new Set<T>();
  const parts: T[][] = [];
  const connect = (v: T) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of next(v)) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const part: T[] = [];
    let w: T;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      part.push(w);
    } while (w !== v);
    // the root first: the node met first in `nodes` order
    if (part.length > 1) parts.push(part.reverse());
  };
  for (const v of nodes) if (!index.has(v)) connect(v);
  return parts;
}

/** A path that starts at the part's first node, stays inside the part, and returns: breadth-first. */
function pathThrough<T>(part: T[], next: (node: T) => readonly T[]): T[] {
  const inside = new Set(part);
  const start = part[0];
  const cameFrom = new Map<T, T>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    for (const w of next(queue[i])) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const route = [queue[i]];
        while (route[0] !== start) route.unshift(cameFrom.get(route[0])!);
        return route;
      }
      if (!cameFrom.has(w)) {
        cameFrom.set(w, queue[i]);
        queue.push(w);
      }
    }
  }
  return part;
}

if (import.meta.main) {
  const repo = path.resolve(import.meta.dirname, '../..');
  const { files, imports } = readImports(repo);
  const pairs = new Map<string, number>();
  for (const imp of imports) {
    const from = layerOf(imp.from)?.name ?? '?';
    const to = layerOf(imp.to)?.name ?? '?';
    if (from !== to) pairs.set(`${from} → ${to}`, (pairs.get(`${from} → ${to}`) ?? 0) + 1);
  }
  console.log('imports between layers (count):');
  for (const [key, n] of [...pairs].sort()) console.log(`  ${key}: ${n}`);
  if (process.argv.includes('--cycles')) {
    const next = (f: string) => imports.filter((i) => i.from === f && layerOf(i.to) === layerOf(f)).map((i) => i.to);
    for (const layer of LAYERS) {
      for (const part of connectedParts(files.filter((f) => layerOf(f) === layer), next)) {
        const circle = pathThrough(part, next);
        console.log(`${part.length} files in a circle inside ${layer.name}, e.g. ${[...circle, circle[0]].join(' → ')}`);
        if (process.argv.includes('--files')) for (const f of part.sort()) console.log(`  ${f}`);
      }
    }
  }
  const problems = layerProblems(files, imports);
  for (const p of problems) console.log(p);
  console.log(problems.length ? `${problems.length} problems` : 'the layering holds');
  process.exitCode = problems.length ? 1 : 0;
}

/** Imports that join subsystems kept apart (APART in layers.ts), one message each. */
export function apartProblems(imports: readonly Import[], layers: readonly Layer[] = LAYERS, apart = APART): string[] {
  const problems: string[] = [];
  for (const imp of imports) {
    const from = layerOf(imp.from, layers)?.name;
    const to = layerOf(imp.to, layers)?.name;
    if (from === undefined || to === undefined) continue;
    if (apart.some((a) => a.from.includes(from) && a.to.includes(to))) {
      problems.push(`${describe(imp.from, layers)} imports ${describe(imp.to, layers)}: the subsystems stay apart`);
    }
  }
  return problems;
}
