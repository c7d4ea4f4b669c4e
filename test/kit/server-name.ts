// The one thing Gatehouse and nginx say differently on purpose: their name.
// Gatehouse signs `Server` and its error pages `gatehouse/VERSION`
// (`gatehouse` with server_tokens off), nginx `nginx/VERSION` (`nginx`).
// Tests that compare the two servers' bytes mask that name here and nothing
// else: the name becomes SERVER/V (SERVER without a version), and a
// Content-Length whose body held the name shrinks by exactly what masking
// took out of that body, so a wrong length stays wrong.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { specialPage } from '../../src/http/special-response.ts';

/** package.json's version: what Gatehouse says after `gatehouse/`. */
export const GATEHOUSE_VERSION = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version as string;
export const GATEHOUSE_VER = `gatehouse/${GATEHOUSE_VERSION}`;

/** nginx's or Gatehouse's signature: the name, `/VERSION`, ` (BUILD)`. */
const SIGN = String.raw`(?:nginx|gatehouse)(?:\/[0-9][^\s<()]*)?(?: \([^)<]*\))?`;
const SERVER_LINE = new RegExp(String.raw`^(server: *)(${SIGN})[ \t]*$`, 'gim');
// (caseless: a body filter may have changed the page, e.g. upper-cased it)
const PAGE_SIGN = new RegExp(String.raw`(<hr><center>)(${SIGN})(</center>)`, 'gi');

function masked(sign: string): string {
  return sign.includes('/') ? 'SERVER/V' : 'SERVER';
}

/** A body (an error page) with its `<hr><center>NAME</center>` masked. */
export function maskNameInBody(body: string): string {
  return body.replace(PAGE_SIGN, (_all, open: string, sign: string, close: string) => `${open}${masked(sign)}${close}`);
}

/** A `Server: NAME` header line (or a block of them) masked. */
export function maskNameInHead(head: string): string {
  return head.replace(SERVER_LINE, (_all, pre: string, sign: string) => `${pre}${masked(sign)}`);
}

/**
 * Whether a response without its body (HEAD) had a page the server made
 * itself, signed `sign`: its Content-Length is one of those pages' lengths.
 */
function generatedPage(status: number, sign: string, length: number): boolean {
  for (const code of status === 400 ? [400, 494, 495, 496, 497] : status === 404 ? [404, 498] : [status]) {
    for (const padding of [false, true]) {
      const page = specialPage(code, 'off', padding);
      if (page !== undefined && page.length - 'gatehouse'.length + sign.length === length) return true;
    }
  }
  return false;
}

/** How many bytes masking takes out of the page of a bodiless response whose head says `Server: sign`. */
function shrunkUnseen(status: number, sign: string | undefined, length: number): number {
  if (sign === undefined || !new RegExp(`^${SIGN}$`).test(sign) || !generatedPage(status, sign, length)) return 0;
  return sign.length - masked(sign).length;
}

/** The name a client was told: in a `Server` header, else (an HTTP/0.9 answer has no head) on a page. */
export function signIn(text: string): string | undefined {
  return /^server: *(.*?)[ \t]*\r$/im.exec(text)?.[1] ?? new RegExp(PAGE_SIGN.source, 'i').exec(text)?.[2];
}

const nginxSigns = new Map<string, string>();

/** The name a server (a RunningServer's binary and flavor) signs with under `server_tokens on`: `gatehouse/VERSION`, or nginx's `nginx -v`. */
export function signOf(srv: { binary: string; flavor: string }): string {
  if (srv.flavor === 'gatehouse') return GATEHOUSE_VER;
  let sign = nginxSigns.get(srv.binary);
  if (sign === undefined) {
    const out = spawnSync(srv.binary, ['-v'], { encoding: 'utf8' });
    sign = /nginx version: (\S+)/.exec(`${out.stderr}${out.stdout}`)?.[1] ?? 'nginx';
    nginxSigns.set(srv.binary, sign);
  }
  return sign;
}

/** The length of the server's own page for `status` signed `sign`. */
export function pageLength(status: number, sign: string): number {
  return specialPage(status, 'off', false)!.length - 'gatehouse'.length + sign.length;
}

/**
 * `$bytes_sent` of a response with `Server: sign` as masking changes it:
 * less what masking takes out of that header and, when `bodyBytes` is the
 * length of the server's own page for `status`, out of that page.
 */
export function maskNameInBytesSent(status: number, bytesSent: number, bodyBytes: number, sign: string): number {
  return bytesSent - (sign.length - masked(sign).length) - shrunkUnseen(status, sign, bodyBytes);
}

/**
 * A length counted by the server (Content-Length of a HEAD, `$body_bytes_sent`)
 * as masking changes it: that of the masked page when `length` is the length
 * of the server's own page for `status` signed `sign` (its `Server` header),
 * else `length` as it is.
 */
export function maskNameInPageLength(status: number, length: number, sign: string | undefined): number {
  return length - shrunkUnseen(status, sign, length);
}

/**
 * A parsed response's header fields and body with the name masked:
 * `Server`'s value, the page's signature, and Content-Length following
 * what masking took out of the body. Without a body (`status` given, the
 * response to a HEAD), a Content-Length that is the length of the server's
 * own page for `status` follows what masking would take out of it.
 */
export function maskNameInResponse<H extends [string, string]>(headers: H[], body: string, status?: number): { headers: H[]; body: string } {
  const out = maskNameInBody(body);
  let shrunk = body.length - out.length;
  if (body === '' && status !== undefined) {
    const server = headers.find((h) => h[0].toLowerCase() === 'server')?.[1];
    const cl = headers.find((h) => h[0].toLowerCase() === 'content-length')?.[1];
    if (cl !== undefined) shrunk = shrunkUnseen(status, server, Number(cl));
  }
  return {
    headers: headers.map((h) => {
      const name = h[0].toLowerCase();
      if (name === 'server') return [h[0], maskNameInHead(`server: ${h[1]}`).slice(8)] as unknown as H;
      if (name === 'content-length' && shrunk !== 0 && /^\d+$/.test(h[1])) return [h[0], String(Number(h[1]) - shrunk)] as unknown as H;
      return h;
    }),
    body: out,
  };
}

const STATUS_LINE = /^HTTP\/\d\.\d \d{3}/m;

/**
 * What a client read on an HTTP/1 connection (one response or several,
 * latin1) with the name masked in every head and body, each Content-Length
 * adjusted to its masked body. A response whose Content-Length is followed
 * by the next status line (HEAD, 304) has no body.
 */
export function maskServerName(text: string): string {
  let out = '';
  let at = 0;
  for (;;) {
    const rest = text.slice(at);
    const start = rest.search(STATUS_LINE);
    if (start < 0) return out + maskNameInBody(rest);
    out += maskNameInBody(rest.slice(0, start));
    at += start;
    const headEnd = text.indexOf('\r\n\r\n', at);
    if (headEnd < 0) return out + maskNameInHead(text.slice(at));
    let head = maskNameInHead(text.slice(at, headEnd + 4));
    const bodyAt = headEnd + 4;
    const cl = /^content-length: *(\d+)\r$/im.exec(head);
    if (!cl || /^transfer-encoding:/im.test(head) || text.startsWith('HTTP/', bodyAt) || bodyAt === text.length) {
      // a body up to the next response (chunked, or up to the close), or none
      const next = text.slice(bodyAt).search(STATUS_LINE);
      const end = next < 0 ? text.length : bodyAt + next;
      if (cl && end === bodyAt) {
        const status = Number(/^HTTP\/\d\.\d (\d{3})/.exec(head)![1]);
        const sign = /^server: *(.*?)[ \t]*\r$/im.exec(text.slice(at, headEnd + 4))?.[1];
        const shrunk = shrunkUnseen(status, sign, Number(cl[1]));
        if (shrunk !== 0) head = head.slice(0, cl.index) + cl[0].replace(cl[1], String(Number(cl[1]) - shrunk)) + head.slice(cl.index + cl[0].length);
      }
      out += head + maskNameInBody(text.slice(bodyAt, end));
      at = end;
      if (next < 0) return out;
      continue;
    }
    const body = text.slice(bodyAt, bodyAt + Number(cl[1]));
    const maskedBody = maskNameInBody(body);
    const shrunk = body.length - maskedBody.length;
    if (shrunk !== 0) head = head.slice(0, cl.index) + cl[0].replace(cl[1], String(Number(cl[1]) - shrunk)) + head.slice(cl.index + cl[0].length);
    out += head + maskedBody;
    at = bodyAt + body.length;
    if (at >= text.length) return out;
  }
}
