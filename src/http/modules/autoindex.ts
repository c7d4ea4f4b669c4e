/**
 * ngx_http_autoindex_module: directory listings for URIs ending in `/`
 * (GET and HEAD) when no index file answered: `autoindex`,
 * `autoindex_format html|xml|json|jsonp`, `autoindex_exact_size`,
 * `autoindex_localtime`.
 *
 * The output is nginx's byte for byte: names starting with `.` left out,
 * directories first, then bytewise order; the HTML page with names cut at
 * 50 characters (`..&gt;`), columns padded, sizes exact or in K/M/G with
 * nginx's rounding; UTF-8 names counted in characters when the response's
 * charset is utf-8. As nginx, the head goes out before the directory is
 * read (so a HEAD never reads it), and entries are stat()ed, following
 * symbolic links (a dangling one is listed as itself).
 */
import fs from 'node:fs';
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { MergedConf } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import { sysErrorText } from '../../conf/errors.ts';
import { enumOf, flagArg } from '../../conf/values.ts';
import { setting } from '../../conf/setters.ts';
import { DECLINED, DONE } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { endBody, httpDate, sendHeader } from '../response.ts';
import { argValue } from '../core/variables.ts';
import { mapUriToPath } from '../core/root.ts';

type Format = 'html' | 'json' | 'jsonp' | 'xml';

interface AutoindexConf {
  enable?: boolean;
  format?: Format;
  localtime?: boolean;
  exactSize?: boolean;
}

const AUTOINDEX_DEFAULTS = { enable: false, format: 'html', localtime: false, exactSize: true } as const satisfies AutoindexConf;
const autoindexSlot = defineSlot<AutoindexConf, typeof AUTOINDEX_DEFAULTS>('autoindex', () => ({}), inheritUnset, AUTOINDEX_DEFAULTS);

interface Entry {
  /** The name's bytes as a byte string. */
  name: string;
  dir: boolean;
  file: boolean;
  /** Seconds. */
  mtime: number;
  size: number;
}

/** Longest name shown in the HTML listing (NGX_HTTP_AUTOINDEX_NAME_LEN). */
const NAME_LEN = 50;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** Bytes ngx_escape_uri(NGX_ESCAPE_URI_COMPONENT) escapes, as nginx's bit table. */
const COMPONENT_UNSAFE = (() => {
  const words = [0xffffffff, 0xfc009fff, 0x78000001, 0xb8000001, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff];
  const t = new Uint8Array(256);
  for (let c = 0; c < 256; c++) t[c] = (words[c >> 5] >>> (c & 31)) & 1;
  return t;
})();

function escapeUriComponent(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i) & 0xff;
    out += COMPONENT_UNSAFE[c] ? '%' + c.toString(16).toUpperCase().padStart(2, '0') : s[i];
  }
  return out;
}

const HTML_ESCAPES: Record<string, string> = { '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' };

/** ngx_escape_html. */
function escapeHtml(s: string): string {
  return s.replace(/[<>&"]/g, (c) => HTML_ESCAPES[c]);
}

const JSON_SHORT: Record<number, string> = { 0x0a: '\\n', 0x0d: '\\r', 0x09: '\\t', 0x08: '\\b', 0x0c: '\\f' };

/** ngx_escape_json over a byte string. */
function escapeJson(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22 || c === 0x5c) out += '\\' + s[i];
    else if (c > 0x1f) out += s[i];
    else out += JSON_SHORT[c] ?? '\\u00' + (c >> 4) + (c & 15).toString(16).toUpperCase();
  }
  return out;
}

/** ngx_utf8_decode: the end of the character at `i`, or -1 for invalid UTF-8. */
function utf8Next(s: string, i: number): number {
  let u = s.charCodeAt(i);
  let len: number;
  let valid: number;
  if (u >= 0xf8) return -1;
  if (u >= 0xf0) { u &= 0x07; valid = 0xffff; len = 3; }
  else if (u >= 0xe0) { u &= 0x0f; valid = 0x7ff; len = 2; }
  else if (u >= 0xc2) { u &= 0x1f; valid = 0x7f; len = 1; }
  else return -1;
  if (s.length - i - 1 < len) return -1;
  for (let k = 1; k <= len; k++) {
    const b = s.charCodeAt(i + k);
    if (b < 0x80) return -1;
    u = (u << 6) | (b & 0x3f);
  }
  return u > valid && u <= 0x10ffff ? i + len + 1 : -1;
}

/** ngx_utf8_length: characters, or the byte length when the name is not valid UTF-8. */
function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; n++) {
    if (s.charCodeAt(i) < 0x80) { i++; continue; }
    const next = utf8Next(s, i);
    if (next < 0) return s.length;
    i = next;
  }
  return n;
}

/** The bytes of the first `chars` characters of valid UTF-8 `s`. */
function utf8Prefix(s: string, chars: number): string {
  let i = 0;
  for (let n = 0; n < chars && i < s.length; n++) i = s.charCodeAt(i) < 0x80 ? i + 1 : utf8Next(s, i);
  return s.slice(0, i);
}

/** An entry's `<a>` text and padding in the HTML listing (the middle of ngx_http_autoindex_html's loop). */
function htmlName(e: Entry, utf8: boolean): string {
  const name = e.name;
  let len = utf8 ? utf8Length(name) : name.length;
  const long = len > NAME_LEN;
  const escape = /[<>&"]/.test(name);
  let shown: string;
  if (name.length !== len) {
    shown = utf8Prefix(name, long ? NAME_LEN - 3 : NAME_LEN);
    if (escape) shown = escapeHtml(shown);
  } else if (escape) {
    shown = escapeHtml(name.slice(0, long ? NAME_LEN - 3 : len));
  } else {
    shown = long ? name.slice(0, NAME_LEN - 3) : name;
  }
  if (long) return shown + '..&gt;</a>';
  if (e.dir && len < NAME_LEN) {
    shown += '/';
    len++;
  }
  return shown + '</a>' + ' '.repeat(NAME_LEN - len);
}

function pad2(n: number): string {
  return String(n).padStart(2, '0');
}

/** The size column: exact, or nginx's rounded K/M/G. */
function sizeColumn(e: Entry, exact: boolean): string {
  if (exact) return e.dir ? '                  -' : String(e.size).padStart(19);
  if (e.dir) return '      -';
  const length = e.size;
  const G = 1024 * 1024 * 1024;
  const M = 1024 * 1024;
  let size: number;
  let scale: string;
  if (length > G - 1) {
    size = Math.floor(length / G) + (length % G > G / 2 - 1 ? 1 : 0);
    scale = 'G';
  } else if (length > M - 1) {
    size = Math.floor(length / M) + (length % M > M / 2 - 1 ? 1 : 0);
    scale = 'M';
  } else if (length > 9999) {
    size = Math.floor(length / 1024) + (length % 1024 > 511 ? 1 : 0);
    scale = 'K';
  } else {
    return ' ' + String(length).padStart(6);
  }
  return String(size).padStart(6) + scale;
}

function htmlListing(r: HttpRequest, entries: Entry[], conf: MergedConf<typeof autoindexSlot>): string {
  const utf8 = /;\s*charset=utf-8$/i.test(r.contentType ?? '');
  const uri = escapeHtml(r.uri);
  // autoindex_localtime shifts by the current offset from UTC, as nginx does
  const shift = conf.localtime ? -new Date().getTimezoneOffset() * 60 : 0;
  let out = `<html>\r\n<head><title>Index of ${uri}</title></head>\r\n<body>\r\n<h1>Index of ${uri}</h1><hr><pre><a href="../">../</a>\r\n`;
  for (const e of entries) {
    const t = new Date((e.mtime + shift) * 1000);
    const date = `${pad2(t.getUTCDate())}-${MONTHS[t.getUTCMonth()]}-${t.getUTCFullYear()} ${pad2(t.getUTCHours())}:${pad2(t.getUTCMinutes())}`;
    out += `<a href="${escapeUriComponent(e.name)}${e.dir ? '/' : ''}">${htmlName(e, utf8)} ${date} ${sizeColumn(e, conf.exactSize)}\r\n`;
  }
  return out + '</pre><hr></body>\r\n</html>\r\n';
}

function kind(e: Entry): string {
  return e.dir ? 'directory' : e.file ? 'file' : 'other';
}

function jsonListing(entries: Entry[], callback: string | undefined): string {
  let out = callback === undefined ? '[' : `/* callback */\r\n${callback}([`;
  out += entries.map((e) => {
    const head = `\r\n{ "name":"${escapeJson(e.name)}", "type":"${kind(e)}", "mtime":"${httpDate(e.mtime * 1000)}`;
    return head + (e.file ? `", "size":${e.size}` : '"') + ' }';
  }).join(',');
  out += '\r\n]';
  return callback === undefined ? out : out + ');';
}

function xmlListing(entries: Entry[]): string {
  let out = '<?xml version="1.0"?>\r\n<list>\r\n';
  for (const e of entries) {
    const t = new Date(e.mtime * 1000);
    const mtime = `${t.getUTCFullYear()}-${pad2(t.getUTCMonth() + 1)}-${pad2(t.getUTCDate())}T${pad2(t.getUTCHours())}:${pad2(t.getUTCMinutes())}:${pad2(t.getUTCSeconds())}Z`;
    const type = kind(e);
    out += `<${type} mtime="${mtime}"${e.file ? ` size="${e.size}"` : ''}>${escapeHtml(e.name)}</${type}>\r\n`;
  }
  return out + '</list>\r\n';
}

/** ngx_http_autoindex_jsonp_callback: the callback, '' for none, or undefined when it is not acceptable. */
function jsonpCallback(r: HttpRequest): string | undefined {
  const callback = argValue(r.args, 'callback') ?? '';
  if (callback.length > 128) {
    requestLog(r).info(`client sent too long callback name: "${callback}"`);
    return undefined;
  }
  if (!/^[A-Za-z0-9_.]*$/.test(callback)) {
    requestLog(r).info(`client sent invalid callback name: "${callback}"`);
    return undefined;
  }
  return callback;
}

/** Reads the directory's entries (ngx_read_dir + ngx_de_info): undefined when reading failed. */
async function readEntries(r: HttpRequest, dir: Buffer, names: Buffer[]): Promise<Entry[] | undefined> {
  const entries: Entry[] = [];
  for (const raw of names) {
    const name = raw.toString('latin1');
    if (name.startsWith('.')) continue;
    const file = Buffer.concat([dir, Buffer.from('/'), raw]);
    let st: fs.Stats;
    try {
      st = await fs.promises.stat(file);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code !== 'ENOENT' && e.code !== 'ELOOP') {
        requestLog(r).crit(`stat() "${file.toString('latin1')}" failed ${sysErrorText(e)}`);
        if (e.code === 'EACCES') continue;
        return undefined;
      }
      try {
        st = await fs.promises.lstat(file);
      } catch (err2) {
        requestLog(r).crit(`lstat() "${file.toString('latin1')}" failed ${sysErrorText(err2)}`);
        return undefined;
      }
    }
    entries.push({ name, dir: st.isDirectory(), file: st.isFile(), mtime: Math.floor(st.mtimeMs / 1000), size: st.size });
  }
  // directories first, then bytewise (ngx_http_autoindex_cmp_entries)
  entries.sort((a, b) => (a.dir !== b.dir ? (a.dir ? -1 : 1) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return entries;
}

/** Declines synchronously where autoindex is off or the request is not for a directory. */
function autoindexHandler(r: HttpRequest): number | Promise<number> {
  if (!r.uri.endsWith('/')) return DECLINED;
  if (r.method !== 'GET' && r.method !== 'HEAD') return DECLINED;
  const conf = r.level.get(autoindexSlot);
  if (!conf.enable) return DECLINED;
  return listDirectory(r, conf);
}

async function listDirectory(r: HttpRequest, conf: MergedConf<typeof autoindexSlot>): Promise<number> {

  let path = mapUriToPath(r).path;
  if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
  let format: Format = conf.format;
  let callback: string | undefined;
  if (format === 'jsonp') {
    callback = jsonpCallback(r);
    if (callback === undefined) return 400;
    if (callback === '') format = 'json';
  }
  const dir = Buffer.from(path, 'latin1');
  let names: Buffer[];
  try {
    names = await fs.promises.readdir(dir, { encoding: 'buffer' });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const text = `opendir() "${path}" failed ${sysErrorText(e)}`;
    if (e.code === 'ENOENT' || e.code === 'ENOTDIR' || e.code === 'ENAMETOOLONG') { requestLog(r).error(text); return 404; }
    if (e.code === 'EACCES') { requestLog(r).error(text); return 403; }
    requestLog(r).crit(text);
    return 500;
  }

  r.status = 200;
  r.contentType = format === 'json' ? 'application/json' : format === 'jsonp' ? 'application/javascript'
    : format === 'xml' ? 'text/xml; charset=utf-8' : 'text/html';
  await sendHeader(r);
  if (r.method === 'HEAD') {
    endBody(r);
    return DONE;
  }
  const entries = await readEntries(r, dir, names);
  if (!entries) {
    // the head is out: nginx ends the connection
    r.sink.abort();
    return DONE;
  }
  const body = format === 'html' ? htmlListing(r, entries, conf)
    : format === 'xml' ? xmlListing(entries)
    : jsonListing(entries, format === 'jsonp' ? callback : undefined);
  endBody(r, Buffer.from(body, 'latin1'));
  return DONE;
}

export const autoindexModule: HttpModule = {
  name: 'ngx_http_autoindex_module',
  directives: [
    { name: 'autoindex', contexts: HTTP_ANY, args: 'flag', handler: setting(autoindexSlot, 'enable', flagArg) },
    {
      name: 'autoindex_format', contexts: Ctx.HTTP | Ctx.SERVER | Ctx.LOCATION, args: 1,
      handler: setting(autoindexSlot, 'format', enumOf(['html', 'json', 'jsonp', 'xml'])),
    },
    { name: 'autoindex_localtime', contexts: HTTP_ANY, args: 'flag', handler: setting(autoindexSlot, 'localtime', flagArg) },
    { name: 'autoindex_exact_size', contexts: HTTP_ANY, args: 'flag', handler: setting(autoindexSlot, 'exactSize', flagArg) },
  ],
  postconfiguration(http) {
    // after index, before static (nginx's content phase order)
    http.addPhaseHandler('CONTENT', 200, autoindexHandler);
  },
};
