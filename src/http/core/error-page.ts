/**
 * ngx_http_core_module's `error_page` (and the handling behind it, nginx's
 * ngx_http_send_error_page): when a request ends with a listed status —
 * from any phase, a content handler's 404 or a proxy's 502 alike — answer
 * with another URI (an internal redirect, the method becoming GET), a named
 * location, or a redirect to a URL. The response keeps the original status
 * unless `=code` (or a bare `=`, taking the target's status) says otherwise.
 */
import { defineSlot } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { httpMainOf } from '../http-conf.ts';
import { internalRedirect, namedLocation } from '../phases.ts';
import type { HttpRequest } from '../request.ts';
import { sendSpecialResponse } from '../response.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { coreLoc } from './settings.ts';

interface ErrorPage {
  /** -1: keep the error's status; 0 (`=`): the target's; otherwise this status. */
  overwrite: number;
  value: ComplexValue;
  /** Arguments split off a constant URI at configuration time. */
  args: string | undefined;
}

interface ErrorPageConf {
  /** By status, the first written winning; a level with its own `error_page` inherits none. */
  pages: Map<number, ErrorPage> | undefined;
}

export const errorPageConf = defineSlot<ErrorPageConf>('error_page', () => ({ pages: undefined }), (parent, child) => {
  if (child.pages === undefined) child.pages = parent.pages;
});

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

function readErrorPage(cf: ConfContext, node: ConfNode): string | void {
  const a = node.args;
  const conf = cf.get(errorPageConf);
  const invalid = (v: string) => cf.error(`invalid value "${v}"`);
  let overwrite = -1;
  let codes = a.length - 1;
  const eq = a[a.length - 2];
  if (eq.startsWith('=')) {
    if (a.length === 2) throw invalid(eq);
    if (eq.length > 1) {
      if (!/^\d+$/.test(eq.slice(1))) throw invalid(eq);
      overwrite = Number(eq.slice(1));
    } else {
      overwrite = 0;
    }
    codes--;
  }
  const uri = a[a.length - 1];
  let value = compileComplex(cf, httpMainOf(cf).variables, uri);
  let args: string | undefined;
  if (value.constant !== undefined && uri.startsWith('/')) {
    const q = uri.indexOf('?');
    if (q >= 0) {
      value = compileComplex(cf, httpMainOf(cf).variables, uri.slice(0, q));
      args = uri.slice(q + 1);
    }
  }
  conf.pages ??= new Map();
  for (const code of a.slice(0, codes)) {
    const status = /^\d+$/.test(code) ? Number(code) : NaN;
    if (Number.isNaN(status) || status === 499) throw invalid(code);
    if (status < 300 || status > 599) throw cf.error(`value "${code}" must be between 300 and 599`);
    // nginx's internal 494-497 go out as 400 unless told otherwise
    const own = overwrite === -1 && status >= 494 && status <= 497 ? 400 : overwrite;
    if (!conf.pages.has(status)) conf.pages.set(status, { overwrite: own, value, args });
  }
}

export const errorPageDirectives: Directive[] = [
  { name: 'error_page', contexts: HTTP_ANY | Ctx.LIF, args: [2, Infinity], handler: readErrorPage },
];

/**
 * Installed as `http.errorPage` (called by finalize() for every status):
 * answers with the page configured for `status`, returning false when none
 * applies (then nginx's own page is sent).
 */
export async function sendErrorPage(r: HttpRequest, status: number): Promise<boolean> {
  if (r.errorPageDone || r.uriChanges === 0) return false;
  const pages = r.level.get(errorPageConf).pages;
  if (!pages) return false;
  // without recursive_error_pages, a location's error pages apply once per request
  if (!r.level.get(coreLoc).recursiveErrorPages) r.errorPageDone = true;
  const page = pages.get(status);
  if (!page) return false;

  if (page.overwrite >= 0) r.errStatus = page.overwrite;
  const uri = page.value.evaluate(r);
  if (uri.startsWith('/')) {
    let path = uri;
    let args = page.args ?? '';
    if (page.value.constant === undefined) {
      const q = uri.indexOf('?');
      if (q >= 0) {
        path = uri.slice(0, q);
        args = uri.slice(q + 1);
      }
    }
    if (r.method !== 'HEAD') r.method = 'GET';
    await internalRedirect(r, path, args);
    return true;
  }
  if (uri.startsWith('@')) {
    await namedLocation(r, uri);
    return true;
  }
  if (!REDIRECTS.has(page.overwrite)) r.errStatus = 302;
  r.location = uri;
  await sendSpecialResponse(r, r.errStatus);
  return true;
}
