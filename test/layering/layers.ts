/**
 * The layer map: which layer each source file belongs to, and the order of
 * the layers (docs/architecture.md, "Layers"). This is the one place to
 * change when a folder is added or moved: a file's layer is given by the
 * longest prefix below that matches its path.
 */

export interface Layer {
  name: string;
  /** Position from the bottom; a file may import from its own tier and below. */
  tier: number;
  /** Paths from the repository root: a folder ends with `/`, a file is named whole. */
  paths: string[];
}

export const LAYERS: Layer[] = [
  { name: 'conf', tier: 0, paths: ['src/conf/'] },
  // the cycle, logs, shared memory, and what every subsystem uses (addresses, PROXY protocol, variables)
  { name: 'core', tier: 1, paths: ['src/core/'] },
  { name: 'upstream', tier: 2, paths: ['src/upstream/'] },
  { name: 'tls', tier: 2, paths: ['src/tls/'] },
  // the engines, each with the modules nginx keeps beside it (core in src/http/core/, http2 in
  // src/http/http2/); the upstream engine (src/http/upstream/) is part of the http engine
  { name: 'http engine', tier: 3, paths: ['src/http/'] },
  { name: 'stream engine', tier: 3, paths: ['src/stream/'] },
  // the Lua VM and its ngx.* API: below the modules that hook it into phases (style.md)
  { name: 'lua', tier: 3, paths: ['src/lua/'] },
  // the ACME protocol client (nginx-acme's src/acme): below ngx_http_acme_module (src/http/modules/acme/), which configures it
  { name: 'acme', tier: 3, paths: ['src/acme/'] },
  { name: 'http modules', tier: 4, paths: ['src/http/modules/'] },
  { name: 'stream modules', tier: 4, paths: ['src/stream/modules/'] },
  // the gateway's control plane (Admin API, stores, schemas, plugins): the gateway module loads it
  { name: 'gateway', tier: 4, paths: ['src/gateway/'] },
  // what puts it together: the module list, the master and worker processes, the command line
  { name: 'program', tier: 5, paths: ['src/modules.ts', 'src/process/', 'src/cli/'] },
];

/**
 * Subsystems kept apart, as nginx keeps http and stream: no file of the
 * first layers imports a file of the second, whatever their tiers (what
 * both use lives in the core or src/upstream).
 */
export const APART: Array<{ from: string[]; to: string[] }> = [
  { from: ['stream engine', 'stream modules'], to: ['http engine', 'http modules'] },
];

/**
 * The folders whose files are checked. A module kept outside src/ (one
 * `load_module` loads, e.g. a test module in test/modules/) is checked by
 * adding its folder here and to a modules layer above.
 */
export const ROOTS = ['src'];

/** The layer of `file` (a path from the repository root, with `/`), or undefined when no rule names it. */
export function layerOf(file: string, layers: readonly Layer[] = LAYERS): Layer | undefined {
  let best: Layer | undefined;
  let bestLength = -1;
  for (const layer of layers) {
    for (const p of layer.paths) {
      const hit = p.endsWith('/') ? file.startsWith(p) : file === p;
      if (hit && p.length > bestLength) {
        best = layer;
        bestLength = p.length;
      }
    }
  }
  return best;
}
