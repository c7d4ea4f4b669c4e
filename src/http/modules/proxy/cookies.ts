/**
 * proxy_cookie_domain, proxy_cookie_path and proxy_cookie_flags: rewriting
 * the attributes of upstream Set-Cookie fields (ngx_http_proxy_rewrite_cookie).
 * The field is split at `;` into `name=value` attributes; `domain=` and
 * `path=` values go through their rules (the first that matches wins); flags
 * add, change or drop `Secure`, `HttpOnly` and `SameSite`; the field is
 * rebuilt with `; ` between attributes only when something changed.
 */
import type { ConfContext } from '../../../conf/context.ts';
import type { Directive } from '../../../conf/directive.ts';
import { HTTP_ANY } from '../../../conf/directive.ts';
import { httpMainOf } from '../../http-conf.ts';
import { applyMatch, compileRegex } from '../../regex.ts';
import type { HttpRequest } from '../../request.ts';
import { compileComplex } from '../../../core/variables.ts';
import type { ComplexValue } from '../../../core/variables.ts';
import { proxyLoc } from './conf.ts';
import type { CookieFlagRule, ProxyLocConf } from './conf.ts';
import { compileRule, rewriteRedirect } from './redirect.ts';
import type { RedirectRule } from './redirect.ts';

/** A proxy_cookie_domain text rule matches the whole domain, any case, ignoring a leading dot. */
interface DomainRule {
  pattern: ComplexValue | undefined;
  regex: RegExp | undefined;
  replacement: ComplexValue;
}

const SECURE_ON = 1, SECURE_OFF = 2, HTTPONLY_ON = 4, HTTPONLY_OFF = 8;
const SAMESITE_STRICT = 16, SAMESITE_LAX = 32, SAMESITE_NONE = 64, SAMESITE_OFF = 128;

const FLAG_NAMES: Record<string, number> = {
  secure: SECURE_ON, nosecure: SECURE_OFF, httponly: HTTPONLY_ON, nohttponly: HTTPONLY_OFF,
  'samesite=strict': SAMESITE_STRICT, 'samesite=lax': SAMESITE_LAX, 'samesite=none': SAMESITE_NONE,
  nosamesite: SAMESITE_OFF,
};

interface Attr {
  key: string | undefined;
  value: string | undefined;
}

/** ngx_http_proxy_parse_cookie: attributes split at `;`, keys and values trimmed of spaces. */
function parse(v: string): Attr[] {
  const attrs: Attr[] = [];
  for (const part of v.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) attrs.push({ key: part.trim(), value: undefined });
    else attrs.push({ key: part.slice(0, eq).trim(), value: part.slice(eq + 1).trim() });
  }
  return attrs;
}

function rewriteDomain(r: HttpRequest, rules: DomainRule[], value: string): string | undefined {
  for (const rule of rules) {
    if (rule.regex) {
      const m = rule.regex.exec(value);
      if (!m) continue;
      applyMatch(r, m, undefined);
      return rule.replacement.evaluate(r);
    }
    const dot = value.startsWith('.') ? 1 : 0;
    if (value.slice(dot).toLowerCase() !== rule.pattern!.evaluate(r).toLowerCase()) continue;
    return value.slice(0, dot) + rule.replacement.evaluate(r);
  }
  return undefined;
}

/** Applies the location's cookie rules to one Set-Cookie value; undefined when nothing changed. */
export function rewriteCookie(r: HttpRequest, c: ProxyLocConf, value: string): string | undefined {
  const attrs = parse(value);
  if (attrs[0].value === undefined) return undefined;
  let changed = false;
  for (let i = 1; i < attrs.length; i++) {
    const a = attrs[i];
    if (a.value === undefined) continue;
    const key = a.key!.toLowerCase();
    let v: string | undefined;
    if (key === 'domain' && c.cookieDomains) v = rewriteDomain(r, c.cookieDomains as DomainRule[], a.value);
    else if (key === 'path' && c.cookiePaths) v = rewriteRedirect(r, c.cookiePaths, a.value, 0);
    if (v !== undefined) { a.value = v; changed = true; }
  }
  if (c.cookieFlags && editFlags(r, attrs, c.cookieFlags)) changed = true;
  if (!changed) return undefined;
  let out = '';
  for (const a of attrs) {
    if (a.key === undefined) continue;
    if (out) out += '; ';
    out += a.value === undefined ? a.key : `${a.key}=${a.value}`;
  }
  return out;
}

function editFlags(r: HttpRequest, attrs: Attr[], rules: CookieFlagRule[]): boolean {
  const name = attrs[0].key!;
  const rule = rules.find((f) => (f.regex ? f.regex.test(name) : f.cookie!.evaluate(r).toLowerCase() === name.toLowerCase()));
  if (!rule) return false;
  let flags = 0;
  for (const fv of rule.flags) flags |= FLAG_NAMES[fv.evaluate(r).toLowerCase()] ?? 0;
  if (!flags) return false;
  for (let i = 1; i < attrs.length; i++) {
    const a = attrs[i];
    const key = a.key!.toLowerCase();
    if (key === 'secure') {
      if (flags & SECURE_ON) flags &= ~SECURE_ON;
      else if (flags & SECURE_OFF) a.key = undefined;
    } else if (key === 'httponly') {
      if (flags & HTTPONLY_ON) flags &= ~HTTPONLY_ON;
      else if (flags & HTTPONLY_OFF) a.key = undefined;
    } else if (key === 'samesite') {
      const want = flags & SAMESITE_STRICT ? 'Strict' : flags & SAMESITE_LAX ? 'Lax' : flags & SAMESITE_NONE ? 'None' : undefined;
      if (want) {
        flags &= ~(SAMESITE_STRICT | SAMESITE_LAX | SAMESITE_NONE);
        if ((a.value ?? '').toLowerCase() !== want.toLowerCase()) { a.key = 'SameSite'; a.value = want; }
      } else if (flags & SAMESITE_OFF) {
        a.key = undefined;
      }
    }
  }
  if (flags & SECURE_ON) attrs.push({ key: 'Secure', value: undefined });
  if (flags & HTTPONLY_ON) attrs.push({ key: 'HttpOnly', value: undefined });
  if (flags & SAMESITE_STRICT) attrs.push({ key: 'SameSite', value: 'Strict' });
  else if (flags & SAMESITE_LAX) attrs.push({ key: 'SameSite', value: 'Lax' });
  else if (flags & SAMESITE_NONE) attrs.push({ key: 'SameSite', value: 'None' });
  return true;
}

function rulesDirective(field: 'cookieDomains' | 'cookiePaths'): Directive['handler'] {
  return (cf: ConfContext, node) => {
    const c = cf.get(proxyLoc);
    const a = node.args;
    // hand-written, as proxy_redirect: `off` excludes rules on the same level and rules exclude `off`
    if (c[field] === false) return 'is duplicate';
    if (a.length === 1) {
      if (a[0] !== 'off') throw cf.error(`invalid parameter "${a[0]}"`);
      if (c[field]) return 'is duplicate';
      c[field] = false;
      return;
    }
    const vars = httpMainOf(cf).variables;
    const list = (c[field] || (c[field] = [])) as (RedirectRule | DomainRule)[];
    if (field === 'cookiePaths') {
      list.push(compileRule(cf, vars, a[0], a[1]));
      return;
    }
    if (a[0].startsWith('~')) {
      // domains match case-insensitively, `~` or `~*` alike
      const re = compileRegex(cf, a[0].slice(a[0][1] === '*' ? 2 : 1), true);
      list.push({ pattern: undefined, regex: re.regex, replacement: compileComplex(cf, vars, a[1]) });
      return;
    }
    const strip = (s: string) => (s.startsWith('.') ? s.slice(1) : s);
    list.push({ pattern: compileComplex(cf, vars, strip(a[0])), regex: undefined, replacement: compileComplex(cf, vars, strip(a[1])) });
  };
}

const flagsDirective: Directive['handler'] = (cf, node) => {
  const c = cf.get(proxyLoc);
  const a = node.args;
  // hand-written, as proxy_redirect: `off` excludes rules on the same level and rules exclude `off`
  if (c.cookieFlags === false) return 'is duplicate';
  if (a.length === 1) {
    if (a[0] !== 'off') throw cf.error(`invalid parameter "${a[0]}"`);
    if (c.cookieFlags) return 'is duplicate';
    c.cookieFlags = false;
    return;
  }
  const vars = httpMainOf(cf).variables;
  const flags: ComplexValue[] = [];
  for (const f of a.slice(1)) {
    const v = compileComplex(cf, vars, f);
    if (v.constant !== undefined && FLAG_NAMES[v.constant.toLowerCase()] === undefined) throw cf.error(`invalid parameter "${f}"`);
    flags.push(v);
  }
  const rule: CookieFlagRule = a[0].startsWith('~')
    // cookie names match case-insensitively, `~` or `~*` alike
    ? { cookie: undefined, regex: compileRegex(cf, a[0].slice(a[0][1] === '*' ? 2 : 1), true).regex, flags }
    : { cookie: compileComplex(cf, vars, a[0]), regex: undefined, flags };
  (c.cookieFlags || (c.cookieFlags = [])).push(rule);
};

export const cookieDirectives: Directive[] = [
  { name: 'proxy_cookie_domain', contexts: HTTP_ANY, args: [1, 2], handler: rulesDirective('cookieDomains') },
  { name: 'proxy_cookie_path', contexts: HTTP_ANY, args: [1, 2], handler: rulesDirective('cookiePaths') },
  { name: 'proxy_cookie_flags', contexts: HTTP_ANY, args: [1, 4], handler: flagsDirective },
];
