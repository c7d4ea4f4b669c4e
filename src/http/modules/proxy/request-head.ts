/**
 * The request head sent upstream, byte for byte as ngx_http_proxy_create_request
 * writes it: the request line, the proxy_set_header fields of the location in
 * configuration order followed by nginx's default fields the location did not
 * set (Host, Connection, Content-Length, Transfer-Encoding, TE, Keep-Alive,
 * Expect, Upgrade), fields with an empty value left out, then the client's
 * header fields except those named by either list. The plan is compiled once
 * per location; a request only evaluates values and concatenates.
 */
import type { HttpRequest } from '../../request.ts';
import { compileComplex } from '../../../core/variables.ts';
import type { ComplexValue, VariableRegistry } from '../../../core/variables.ts';

/** How an entry's value is produced. */
const VALUE = 0;
/** `$proxy_host`: the target's host header, no variable lookup. */
const PROXY_HOST = 1;
/** `$proxy_internal_body_length`. */
const BODY_LENGTH = 2;
/** `$proxy_internal_chunked`. */
const CHUNKED = 3;

interface HeaderEntry {
  /** `Name: ` ready to concatenate. */
  prefix: string;
  kind: number;
  value: ComplexValue | undefined;
  /** The value when it is constant (never empty: empty constants are dropped at compile time). */
  constant: string | undefined;
}

export interface HeaderPlan {
  entries: HeaderEntry[];
  /** Lowercased names of every entry, including empty ones: client fields with these names are not passed. */
  skip: Set<string>;
}

/** What a request contributes to its head besides the plan. */
export interface HeadInput {
  method: string;
  uri: string;
  http11: boolean;
  hostHeader: string;
  /** Content-Length to send, or -1 for none. */
  bodyLength: number;
  chunked: boolean;
  passRequestHeaders: boolean;
}

const DEFAULTS: [string, string][] = [
  ['Host', '$proxy_host'],
  ['Connection', 'close'],
  ['Content-Length', '$proxy_internal_body_length'],
  ['Transfer-Encoding', '$proxy_internal_chunked'],
  ['TE', ''],
  ['Keep-Alive', ''],
  ['Expect', ''],
  ['Upgrade', ''],
];

/** Compiles the plan from a location's proxy_set_header lines (ngx_http_proxy_init_headers). */
export function compileHeaderPlan(vars: VariableRegistry, set: { name: string; value: ComplexValue }[] | undefined): HeaderPlan {
  const merged: { name: string; source: string; value: ComplexValue | undefined }[] = [];
  for (const h of set ?? []) merged.push({ name: h.name, source: h.value.source, value: h.value });
  for (const [name, source] of DEFAULTS) {
    if (merged.some((m) => m.name.toLowerCase() === name.toLowerCase())) continue;
    merged.push({ name, source, value: undefined });
  }
  const plan: HeaderPlan = { entries: [], skip: new Set() };
  for (const m of merged) {
    plan.skip.add(m.name.toLowerCase());
    if (m.source === '') continue;
    let kind = VALUE;
    if (m.source === '$proxy_host') kind = PROXY_HOST;
    else if (m.source === '$proxy_internal_body_length') kind = BODY_LENGTH;
    else if (m.source === '$proxy_internal_chunked') kind = CHUNKED;
    const value = kind === VALUE ? (m.value ?? compileComplex(undefined, vars, m.source)) : undefined;
    plan.entries.push({ prefix: m.name + ': ', kind, value, constant: value?.constant });
  }
  return plan;
}

/** Builds the request head (request line, fields, empty line) as a byte string. */
export function buildHead(r: HttpRequest, plan: HeaderPlan, h: HeadInput): string {
  let head = h.method + ' ' + h.uri + (h.http11 ? ' HTTP/1.1\r\n' : ' HTTP/1.0\r\n');
  const entries = plan.entries;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    let v: string;
    switch (e.kind) {
      case PROXY_HOST: v = h.hostHeader; break;
      case BODY_LENGTH: v = h.bodyLength >= 0 ? String(h.bodyLength) : ''; break;
      case CHUNKED: v = h.chunked ? 'chunked' : ''; break;
      default: v = e.constant ?? e.value!.evaluate(r);
    }
    if (v !== '') head += e.prefix + v + '\r\n';
  }
  if (h.passRequestHeaders) {
    const raw = r.headersIn;
    const skip = plan.skip;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i];
      // invalid names (underscores included) were already dropped or kept as nginx does (src/http/request-head.ts)
      if (skip.has(name.toLowerCase())) continue;
      head += name + ': ' + raw[i + 1] + '\r\n';
    }
  }
  return head + '\r\n';
}
