/**
 * ngx_http_secure_link_module: `$secure_link` checks a link's MD5.
 *
 * With `secure_link hash[,expires]` and `secure_link_md5 text` (both may
 * hold variables): the hash is the base64url MD5 of the text (padding
 * optional); `$secure_link` is `1` when it matches and has not expired,
 * `0` when it matches but the time (seconds since the epoch) has passed,
 * and not found otherwise; `$secure_link_expires` is the time given.
 *
 * With `secure_link_secret word` (the older form): the request URI is
 * `/prefix/<md5 hex of rest+word>/rest`, and `$secure_link` is `rest`
 * when it matches.
 */
import crypto from 'node:crypto';
import { defineSlot } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { setting } from '../../conf/setters.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';

interface SecureLinkConf {
  variable?: ComplexValue<HttpRequest>;
  md5?: ComplexValue<HttpRequest>;
  secret?: string;
}

/** nginx's merge: a level with a secret uses it alone; one with neither of the new directives inherits the secret. */
const secureLinkSlot = defineSlot<SecureLinkConf>('secure_link', () => ({}), (parent, child) => {
  if (child.secret !== undefined) return;
  child.variable ??= parent.variable;
  child.md5 ??= parent.md5;
  if (child.variable === undefined && child.md5 === undefined) child.secret = parent.secret;
});

/** r.ctx key: the expiry time a `hash,expires` value gave. */
const EXPIRES = {};

/** ngx_atotm: decimal digits only, -1 when anything else or too large. */
function parseSeconds(s: string): number {
  if (!/^\d+$/.test(s)) return -1;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : -1;
}

function md5(...parts: string[]): Buffer {
  const h = crypto.createHash('md5');
  for (const p of parts) h.update(p, 'latin1');
  return h.digest();
}

/** ngx_decode_base64url: the characters up to the first `=`, none outside the alphabet, not 1 past a multiple of 4. */
function decodeBase64url(s: string): Buffer | undefined {
  const eq = s.indexOf('=');
  const body = eq < 0 ? s : s.slice(0, eq);
  if (!/^[A-Za-z0-9_-]*$/.test(body) || body.length % 4 === 1) return undefined;
  return Buffer.from(body, 'base64url');
}

function secureLink(r: HttpRequest): string | undefined {
  const conf = r.level.get(secureLinkSlot);
  if (conf.secret !== undefined) return oldStyle(r, conf.secret);
  if (!conf.variable || !conf.md5) return undefined;
  let val = conf.variable.evaluate(r);
  let expires = 0;
  const comma = val.indexOf(',');
  if (comma >= 0) {
    const text = val.slice(comma + 1);
    expires = parseSeconds(text);
    if (expires <= 0) return undefined;
    r.ctx.set(EXPIRES, text);
    val = val.slice(0, comma);
  }
  if (val.length > 24) return undefined;
  const hash = decodeBase64url(val);
  if (!hash || hash.length !== 16) return undefined;
  if (!crypto.timingSafeEqual(hash, md5(conf.md5.evaluate(r)))) return undefined;
  return expires && expires < Date.now() / 1000 ? '0' : '1';
}

/** `/prefix/<32 hex digits>/rest` in the request URI as sent, rest + secret hashed. */
function oldStyle(r: HttpRequest, secret: string): string | undefined {
  const uri = r.requestUri;
  const start = uri.indexOf('/', 1) + 1;
  if (start === 0) return undefined;
  const end = uri.indexOf('/', start);
  if (end < 0) return undefined;
  const rest = uri.slice(end + 1);
  if (end - start !== 32 || rest === '') return undefined;
  const given = uri.slice(start, end);
  if (!/^[0-9A-Fa-f]{32}$/.test(given)) return undefined;
  return crypto.timingSafeEqual(Buffer.from(given, 'hex'), md5(rest, secret)) ? rest : undefined;
}

function complexArg(cf: ConfContext, v: string): ComplexValue<HttpRequest> {
  return compileComplex(cf, httpMainOf(cf).variables, v);
}

/** nginx says this at the merge; here at the directive that mixes them on one level. */
function mixed(cf: ConfContext): void {
  const c = cf.get(secureLinkSlot);
  if (c.secret !== undefined && (c.variable !== undefined || c.md5 !== undefined)) {
    throw cf.error('"secure_link_secret" cannot be mixed with "secure_link" and "secure_link_md5"');
  }
}

function checked(handler: Directive['handler']): Directive['handler'] {
  return (cf, node) => {
    const rc = handler(cf, node);
    mixed(cf);
    return rc;
  };
}

export const secureLinkModule: HttpModule = {
  name: 'ngx_http_secure_link_module',
  directives: [
    { name: 'secure_link', contexts: HTTP_ANY, args: 1, handler: checked(setting(secureLinkSlot, 'variable', complexArg)) },
    { name: 'secure_link_md5', contexts: HTTP_ANY, args: 1, handler: checked(setting(secureLinkSlot, 'md5', complexArg)) },
    { name: 'secure_link_secret', contexts: HTTP_ANY, args: 1, handler: checked(setting(secureLinkSlot, 'secret', (_cf, v) => v)) },
  ],
  variables: [
    { name: 'secure_link', get: secureLink },
    { name: 'secure_link_expires', get: (r) => r.ctx.get(EXPIRES) as string | undefined },
  ],
};
