/**
 * ngx_http_core_module's `types {}` block and the content type of a file
 * response: the URI's extension looked up in the location's types, else
 * `default_type`.
 */
import { HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { mainErrorLog } from '../../core/error-log.ts';
import type { HttpRequest } from '../request.ts';
import { coreLoc, CORE_LOC_DEFAULTS } from './settings.ts';

/** What nginx knows without any `types` block (ngx_http_core_default_types). */
const DEFAULT_TYPES = new Map([['html', 'text/html'], ['gif', 'image/gif'], ['jpg', 'image/jpeg']]);

/** The extension of `uri` as ngx_http_set_exten finds it (after the last dot of the last segment). */
export function extensionOf(uri: string): string {
  for (let i = uri.length - 1; i > 1; i--) {
    const c = uri.charCodeAt(i);
    if (c === 0x2e /* . */ && uri.charCodeAt(i - 1) !== 0x2f /* / */) return uri.slice(i + 1);
    if (c === 0x2f) return '';
  }
  return '';
}

/** The content type for a file served at `uri` (ngx_http_set_content_type). */
export function contentTypeFor(r: HttpRequest, uri = r.uri): string {
  const core = r.level.get(coreLoc);
  const ext = extensionOf(uri);
  if (ext) {
    const types = core.types ?? DEFAULT_TYPES;
    const t = types.get(ext) ?? types.get(ext.toLowerCase());
    if (t !== undefined) return t;
  }
  return core.defaultType;
}

export const typesDirectives: Directive[] = [
  {
    // the block holds `type ext ...;` lines, not directives, so it is read here
    name: 'types', contexts: HTTP_ANY, args: 0, block: true,
    handler(cf, node) {
      const c = cf.get(coreLoc);
      if (!Object.hasOwn(c, 'types') || c.types === undefined) c.types = new Map();
      const types = c.types;
      for (const line of node.children ?? []) {
        if (line.children) throw cf.error(`unexpected "{"`);
        if (line.args.length === 0) throw cf.error(`invalid number of arguments in "${line.name}" directive`);
        for (const raw of line.args) {
          const ext = raw.toLowerCase();
          const old = types.get(ext);
          if (old !== undefined) {
            mainErrorLog().warn(`duplicate extension "${raw}", content type: "${line.name}", previous content type: "${old}" in ${line.file}:${line.line}`);
          }
          types.set(ext, line.name);
        }
      }
    },
  },
];

