/**
 * Responses with `Vary` (ngx_http_file_cache_vary): the file under the
 * key's own name holds one variant and records the Vary field and the
 * request values it was stored for; a request whose values differ is looked
 * up under a secondary name, the MD5 of the key and its values, so several
 * variants are cached side by side.
 */
import type { HttpRequest } from '../request.ts';
import { md5 } from './zone.ts';

/** The names listed in a Vary value, lowercased, empty items dropped. */
function varyNames(vary: string): string[] {
  return vary.split(',').map((s) => s.trim().toLowerCase()).filter((s) => s !== '');
}

/**
 * The request's values for the Vary names, normalized as nginx does for
 * comparison: each value's comma-separated items trimmed, empty ones dropped.
 */
export function variantOf(vary: string, r: HttpRequest): string {
  let out = '';
  for (const name of varyNames(vary)) {
    const text = r.headerValues(name).join(',');
    const items = text.split(',').map((s) => s.trim()).filter((s) => s !== '').sort();
    out += `${name}:${items.join(',')}\n`;
  }
  return out;
}

/** The secondary digest a variant is stored under. */
export function variantDigest(key: string, variant: string): Buffer {
  return md5(`${key}\n${variant}`);
}
