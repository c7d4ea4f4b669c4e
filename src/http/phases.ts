/**
 * The phase engine (ngx_http_core_run_phases): server rewrite, location
 * selection, rewrite (repeated after a URI change), access, content, and
 * finalization with nginx's error pages; the log phase runs once the
 * response is done.
 */
import { DECLINED, DONE, OK, Phase } from './http-conf.ts';
import type { LocationConf, PhaseHandler } from './http-conf.ts';
import { enterLocation, findLocation } from './location.ts';
import { coreLoc, coreSrv } from './core/settings.ts';
import type { HttpRequest } from './request.ts';
import { sendSpecialResponse } from './response.ts';
import { specialPage } from './special-response.ts';
import { escapeUri } from './uri.ts';
import { requestLog } from './request-log.ts';
import { mapUriToPath } from './core/root.ts';
import { STAT, statAdd } from '../core/shared.ts';

/**
 * Entry point for a request read from a connection. A head nginx refused
 * (head.error) is answered with that status; with `respond` false (the
 * client went away or timed out) it is only logged.
 */
export function handleRequest(r: HttpRequest, respond: boolean): void {
  // stub_status's Writing: being answered until the response is over (requests are counted
  // as their first bytes come in, by the connection or the HTTP/2 stream)
  statAdd(STAT.WRITING, 1);
  r.sink.onClose(() => {
    statAdd(STAT.WRITING, -1);
    runLogPhase(r);
  });
  const head = r.head;
  if (head.error) {
    requestLog(r, head.errorAction).info(head.errorLog);
    if (!respond) {
      r.status = head.error;
      return;
    }
    void finalize(r, head.error).catch((err) => failed(r, err));
    return;
  }
  if (head.dropped) for (const line of head.dropped) requestLog(r, 'reading client request headers').info(line);
  if (r.bodyError) {
    void finalize(r, r.bodyError).catch((err) => failed(r, err));
    return;
  }
  runPhases(r, Phase.POST_READ)?.catch((err) => failed(r, err));
}

function failed(r: HttpRequest, err: unknown): void {
  requestLog(r).error(`unexpected error: ${(err as Error).stack ?? err}`);
  if (!r.headerSent) finalize(r, 500).catch(() => r.sink.abort());
  else r.sink.abort();
}

/**
 * Runs a phase's handlers from `from` until one decides. Synchronous while
 * the handlers are (the common case: most decline at once); a promise only
 * once a handler returns one — a request allocates no promise per phase.
 */
function runHandlers(r: HttpRequest, handlers: PhaseHandler[], from: number): number | Promise<number> {
  for (let i = from; i < handlers.length; i++) {
    const rc = handlers[i](r);
    if (typeof rc !== 'number') return rc.then((v) => (v !== DECLINED ? v : runHandlers(r, handlers, i + 1)));
    if (rc !== DECLINED) return rc;
  }
  return DECLINED;
}

/**
 * Runs phases from `from` until one takes the request over (nginx's
 * ngx_http_core_run_phases). With `locationChosen` (a named location) the
 * first REWRITE runs without looking the location up. Returns a promise
 * only if a handler or the finalization went asynchronous; a throw becomes
 * a rejected promise.
 */
export function runPhases(r: HttpRequest, from: number, locationChosen = false): Promise<void> | undefined {
  try {
    return drivePhases(r, from, locationChosen);
  } catch (err) {
    return Promise.reject(err);
  }
}

function drivePhases(r: HttpRequest, phase: number, locationChosen: boolean): Promise<void> | undefined {
  for (;;) {
    const rc = runPhase(r, phase, locationChosen);
    locationChosen = false;
    const at = phase;
    const next = typeof rc === 'number' ? afterPhase(r, at, rc) : rc.then((v) => continuePhases(r, at, v));
    if (typeof next !== 'number') return next;
    phase = next;
  }
}

function continuePhases(r: HttpRequest, phase: number, rc: number): Promise<void> | undefined {
  const next = afterPhase(r, phase, rc);
  return typeof next === 'number' ? drivePhases(r, next, false) : next;
}

/** One phase's handlers; FIND_CONFIG runs at the start of REWRITE, as its first step. */
function runPhase(r: HttpRequest, phase: number, locationChosen: boolean): number | Promise<number> {
  switch (phase) {
    case Phase.SERVER_REWRITE:
      r.setLocation(r.server.serverLoc);
      r.level = r.server.level;
      break;
    case Phase.REWRITE:
      if (!locationChosen) {
        const rc = findConfig(r);
        if (rc !== OK) return rc;
      }
      r.uriChanged = false;
      break;
    case Phase.ACCESS:
      // nginx runs no access checks for subrequests (ngx_http_core_access_phase)
      return r.parent ? DECLINED : runAccessPhase(r);
    case Phase.CONTENT:
      if (r.contentHandler) return r.contentHandler(r);
      break;
  }
  return runHandlers(r, r.main.phases[phase], 0);
}

/**
 * What follows a phase that returned `rc`: the next phase to run, or the
 * end of the walk (undefined, or the finalization's promise).
 */
function afterPhase(r: HttpRequest, phase: number, rc: number): number | Promise<void> | undefined {
  if (rc === DONE) return undefined;
  if (phase === Phase.CONTENT) {
    if (rc !== DECLINED) return finalize(r, rc);
    // no content handler took it (ngx_http_core_content_phase)
    if (r.uri.endsWith('/')) {
      requestLog(r).error(`directory index of "${mapUriToPath(r).path}" is forbidden`);
      return finalize(r, 403);
    }
    requestLog(r).error('no handler found');
    return finalize(r, 404);
  }
  if (rc !== DECLINED && rc !== OK) return finalize(r, rc);
  // FIND_CONFIG and REWRITE repeat while rewrites change the URI
  if (phase === Phase.REWRITE && r.uriChanged) {
    if (--r.uriChanges === 0) {
      requestLog(r).error(`rewrite or internal redirection cycle while processing "${r.uri}"`);
      return finalize(r, 500);
    }
    r.internal = true;
    return Phase.REWRITE;
  }
  return phase + 1;
}

/**
 * The access phase (ngx_http_core_access_phase and post_access): with
 * `satisfy all` every handler must allow; with `satisfy any` the first OK
 * ends the phase and a 401/403 is remembered until the phase ends. A 401
 * waits `auth_delay` before it is answered.
 */
function runAccessPhase(r: HttpRequest): number | Promise<number> {
  const handlers = r.main.phases[Phase.ACCESS];
  for (let i = 0; i < handlers.length; i++) {
    const rc = handlers[i](r);
    // a handler that decides (or is still deciding): nginx's full rules from here
    if (rc !== DECLINED) return accessRules(r, i, rc);
  }
  return OK;
}

/** The access rules from handler `from` on, whose result is `first`. */
async function accessRules(r: HttpRequest, from: number, first: number | Promise<number>): Promise<number> {
  const core = r.level.get(coreLoc);
  const any = core.satisfy === 'any';
  let accessCode = 0;
  const handlers = r.main.phases[Phase.ACCESS];
  for (let i = from; i < handlers.length; i++) {
    let rc = i === from ? first : handlers[i](r);
    if (typeof rc !== 'number') rc = await rc;
    if (rc === DECLINED) continue;
    if (rc === DONE) return DONE;
    if (rc === OK) {
      if (!any) continue;
      // the realm a failed handler asked for is not sent after all
      r.setHeader('WWW-Authenticate', undefined);
      return OK;
    }
    if (any && (rc === 403 || rc === 401)) {
      if (accessCode !== 401) accessCode = rc;
      continue;
    }
    return rc === 401 ? authDelay(r) : rc;
  }
  if (accessCode === 403) requestLog(r).error('access forbidden by rule');
  if (accessCode === 401) return authDelay(r);
  return accessCode || OK;
}

async function authDelay(r: HttpRequest): Promise<number> {
  const delay = r.level.get(coreLoc).authDelay ?? 0;
  if (delay > 0) {
    requestLog(r).info('delaying unauthorized request');
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, delay);
      r.onClientGone(() => { clearTimeout(timer); resolve(); });
    });
    if (r.clientGone) {
      requestLog(r).info('client prematurely closed connection');
      return 499;
    }
  }
  return 401;
}

/** Picks the location for r.uri (ngx_http_core_find_config_handler); returns OK or a status. */
function findConfig(r: HttpRequest): number {
  const found = findLocation(r, r.server.locations, r.uri, r.server.serverLoc);
  enterLocation(r, found.loc);
  if (found.loc.internal && !r.internal) return 404;
  const core = r.level.get(coreLoc);
  const len = r.head.contentLength;
  if (core.clientMaxBodySize && len > core.clientMaxBodySize) {
    requestLog(r).error(`client intended to send too large body: ${len} bytes`);
    return 413;
  }
  if (found.autoRedirect) {
    // `/dir` for a proxied `location /dir/`: 301 to the location's name
    r.location = escapeUri(found.loc.name) + (r.args ? `?${r.args}` : '');
    return 301;
  }
  return OK;
}

/** Continues the request at another URI (nginx's ngx_http_internal_redirect). */
export async function internalRedirect(r: HttpRequest, uri: string, args?: string): Promise<number> {
  if (--r.uriChanges === 0) {
    requestLog(r).error(`rewrite or internal redirection cycle while internally redirecting to "${uri}"`);
    await finalize(r, 500);
    return DONE;
  }
  r.uri = uri;
  if (args !== undefined) { r.args = args; r.hasArgs = args !== ''; }
  r.internal = true;
  r.ctx.clear();
  await runPhases(r, Phase.SERVER_REWRITE);
  return DONE;
}

/** Continues the request in a named location (`@name`). */
export async function namedLocation(r: HttpRequest, name: string): Promise<number> {
  const loc: LocationConf | undefined = r.server.named.get(name);
  if (!loc) {
    requestLog(r).error(`could not find named location "${name}"`);
    await finalize(r, 500);
    return DONE;
  }
  if (--r.uriChanges === 0) {
    requestLog(r).error(`rewrite or internal redirection cycle while redirect to named location "${name}"`);
    await finalize(r, 500);
    return DONE;
  }
  r.internal = true;
  r.ctx.clear();
  enterLocation(r, loc);
  await runPhases(r, Phase.REWRITE, true);
  return DONE;
}

/**
 * Finishes a request with a handler's result: DONE/OK mean the handler
 * answered; a status ≥ 300 gets `error_page` handling or nginx's page.
 */
export async function finalize(r: HttpRequest, rc: number): Promise<void> {
  if (rc === DONE || rc === OK || rc === DECLINED) return;
  // a subrequest's creator may answer it instead (nginx's post_subrequest handler: SSI's stub=)
  if (r.parent && !r.headerSent && r.postSubrequest && (await r.postSubrequest(r, rc))) return;
  if (r.headerSent) {
    if (!r.finished) r.sink.abort();
    return;
  }
  if (rc === 444 || rc === 408 || rc === 499) {
    // nginx closes without an answer (444), or ends the request as timed out or abandoned
    r.status = rc;
    r.sink.abort();
    return;
  }
  // nginx's r->err_status: the response goes out with this status, even from an error page's target
  r.errStatus = rc;
  // an error answer does not invite the body (ngx_http_special_response_handler)
  r.expectTested = true;
  if (r.main.errorPage && !r.errorPageDone && (await r.main.errorPage(r, rc))) return;
  if (rc >= 200 && rc < 300 && specialPage(rc, 'on', false) === undefined) {
    r.status = rc;
  }
  await sendSpecialResponse(r, rc);
}

function runLogPhase(r: HttpRequest): void {
  r.finished = true;
  // nginx's ngx_http_free_request debug line (OpenResty's tests order events by it)
  requestLog(r).debug('http close request');
  // the connection closed before a response head went out: the client gave up (nginx's 499),
  // unless the request was closed on purpose with a status of its own (444, 408, ...)
  if (!r.headerSent && r.status < 400) {
    r.status = 499;
    requestLog(r).info('client prematurely closed connection');
  }
  runLogHandlers(r);
}

/**
 * A subrequest is over: with `log_subrequest on` its log phase runs, as
 * nginx's ngx_http_finalize_request does for a subrequest (called by the
 * module that ran it).
 */
export function logSubrequest(sr: HttpRequest): void {
  if (sr.level.get(coreLoc).logSubrequest) runLogHandlers(sr);
}

function runLogHandlers(r: HttpRequest): void {
  for (const h of r.main.phases[Phase.LOG]) {
    try {
      void h(r);
    } catch (err) {
      requestLog(r).error(`log handler failed: ${(err as Error).message}`);
    }
  }
}
