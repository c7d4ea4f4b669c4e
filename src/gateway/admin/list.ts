/**
 * A collection listing as APISIX v3 answers it (apisix/admin/v3_adapter.lua):
 * filters first (`name`, `uri`, `label`, `filter=`), so `total` counts what
 * matched, then paging by creation order when `page` and `page_size` are
 * both numbers.
 */
import type { AdminResponse } from './context.ts';

export interface ListItem {
  key: string;
  value: Record<string, unknown>;
  createdIndex: number;
  modifiedIndex: number;
}

function regex(source: string): RegExp | undefined {
  try { return new RegExp(source); } catch { return undefined; }
}

function matches(item: ListItem, args: URLSearchParams, filterFields: string[]): boolean {
  const v = item.value;
  const name = args.get('name');
  if (name !== null) {
    const re = regex(name);
    if (!re || typeof v.name !== 'string' || !re.test(v.name)) return false;
  }
  const uri = args.get('uri');
  if (uri !== null) {
    const re = regex(uri);
    const uris = [v.uri, ...(Array.isArray(v.uris) ? v.uris : [])].filter((u): u is string => typeof u === 'string');
    if (!re || !uris.some((u) => re.test(u))) return false;
  }
  const label = args.get('label');
  if (label !== null) {
    const labels = v.labels as Record<string, unknown> | undefined;
    if (label === '' || !labels || !(label in labels)) return false;
  }
  const filter = args.get('filter');
  if (filter !== null) {
    for (const [k, want] of new URLSearchParams(filter)) {
      if (!filterFields.includes(k)) continue;
      if (v[k] === undefined || String(v[k]) !== want) return false;
    }
  }
  return true;
}

export function listResponse(items: ListItem[], args: URLSearchParams, filterFields: string[]): AdminResponse {
  let list = items.filter((it) => matches(it, args, filterFields));
  const total = list.length;
  const page = Number(args.get('page') ?? NaN);
  const size = Number(args.get('page_size') ?? NaN);
  if (args.get('page') !== null && args.get('page_size') !== null && !Number.isNaN(page) && !Number.isNaN(size)) {
    if (size < 10 || size > 500) return { status: 400, body: 'page_size must be between 10 and 500', apiVersion: true };
    const p = Math.max(1, Math.floor(page));
    list = [...list].sort((a, b) => a.createdIndex - b.createdIndex).slice((p - 1) * size, p * size);
  }
  return { status: 200, body: { total, list }, apiVersion: true };
}
