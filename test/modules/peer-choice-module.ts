/**
 * A module that is not built in, loaded with `load_module` by
 * test/http/load-module.test.ts to show that a module added from outside
 * src/ can do what the built-in ones do without editing engine files:
 *
 * - a directive: `peer_choice_fallback PORT;` (location), the port a try goes
 *   to after the first one failed to connect;
 * - a phase handler (access) that installs a peer chooser for the request;
 * - `peer_choice_upstream_fallback PORT;` in an `upstream {}` block: the same
 *   chooser for every request to that group (as balancer_by_lua);
 * - a per-try peer choice: the first try goes where proxy_pass points (the
 *   default chooser, wrapped), a try after a connect error goes to
 *   127.0.0.1:PORT, anything else gets no peer;
 * - `$peer_choice_log`: what the chooser was told and did, for the access log;
 * - a header and a body filter: `peer_choice_footer TEXT;` (location) appends
 *   TEXT to the response body at its end (so the length is dropped and the
 *   body goes out chunked, as nginx's filters that change a body do).
 */
import { defineSlot, inheritUnset } from '../../src/conf/context.ts';
import { Ctx } from '../../src/conf/directive.ts';
import { joinBodyFilter, nextBodyFilter } from '../../src/http/body-filter.ts';
import type { BodyFilterEntry } from '../../src/http/body-filter.ts';
import { DECLINED } from '../../src/http/http-conf.ts';
import type { HttpModule } from '../../src/http/http-conf.ts';
import type { HttpRequest } from '../../src/http/request.ts';
import { FT } from '../../src/http/upstream/conf.ts';
import { upstreamGroupOf } from '../../src/http/upstream/module.ts';
import { defaultPeerChooser, setGroupPeerChooser, usePeerChooser } from '../../src/http/upstream/peer-choice.ts';
import type { PeerChooserFactory } from '../../src/http/upstream/peer-choice.ts';
import { peerAt } from '../../src/upstream/peer-chooser.ts';
import type { ChosenPeer, PeerChooser } from '../../src/upstream/peer-chooser.ts';
import { PEER_FAILED, PEER_OK } from '../../src/upstream/round-robin.ts';

const fallbackLoc = defineSlot<{ port?: number }>('peer_choice_fallback', () => ({}), inheritUnset);
const footerLoc = defineSlot<{ text?: string }>('peer_choice_footer', () => ({}), inheritUnset);

/** Per request: the footer still to append (set by the header filter when this request takes part). */
const FOOTER_CTX = {};

/** The body filter: passes chunks on, and the footer with the last one. */
function footerBodyFilter(this: void, r: HttpRequest, chunk: Buffer, eof: boolean, self: BodyFilterEntry): boolean {
  if (!eof) return nextBodyFilter(r, self, chunk, false);
  const footer = Buffer.from(r.ctx.get(FOOTER_CTX) as string, 'latin1');
  return nextBodyFilter(r, self, chunk.length ? Buffer.concat([chunk, footer]) : footer, true);
}

/** The header filter: a response with a body at a location with a footer joins the body filter. */
function footerHeaderFilter(r: HttpRequest, self: BodyFilterEntry): void {
  const text = r.level.get(footerLoc).text;
  if (text === undefined || r.method === 'HEAD' || r.status === 204 || r.status === 304) return;
  r.contentLength = undefined;
  r.ctx.set(FOOTER_CTX, text);
  joinBodyFilter(r, self);
}

/** Per request: the chooser's story, read by $peer_choice_log. */
const LOG_CTX = {};

const FAILURES: Array<[number, string]> = [[FT.ERROR, 'error'], [FT.TIMEOUT, 'timeout'], [FT.INVALID_HEADER, 'invalid_header'],
  [FT.HTTP_502, 'http_502'], [FT.HTTP_503, 'http_503'], [FT.HTTP_504, 'http_504'], [FT.NOLIVE, 'nolive']];

function failureName(ft: number): string {
  if (ft === 0) return 'none';
  return FAILURES.find(([bit]) => ft & bit)?.[1] ?? `0x${ft.toString(16)}`;
}

class FallbackChooser implements PeerChooser {
  tries = 2;
  private readonly first: PeerChooser;
  private onFirst = false;
  private readonly port: number;
  private readonly log: string[];

  constructor(first: PeerChooser, port: number, log: string[]) {
    this.first = first;
    this.port = port;
    this.log = log;
  }

  get(lastFailure: number, lastStatus: number): ChosenPeer | undefined | number {
    this.log.push(`get(${failureName(lastFailure)},${lastStatus})`);
    this.onFirst = lastFailure === 0;
    if (this.onFirst) return this.first.get(lastFailure, lastStatus);
    if (lastFailure & FT.ERROR) return peerAt('127.0.0.1', this.port);
    return undefined;
  }

  free(state: number): boolean {
    this.log.push(state === PEER_OK ? 'free(ok)' : state === PEER_FAILED ? 'free(failed)' : 'free(next)');
    if (this.tries) this.tries--;
    return this.onFirst ? this.first.free(state) : false;
  }
}

/** Choosers that fall back to 127.0.0.1:`port`, each logging into its request's $peer_choice_log. */
function fallbackTo(port: number): PeerChooserFactory {
  return (r, place) => {
    const log: string[] = [];
    r.ctx.set(LOG_CTX, log);
    return new FallbackChooser(defaultPeerChooser(r, place), port, log);
  };
}

function accessHandler(r: HttpRequest): number {
  const port = r.level.get(fallbackLoc).port;
  if (port !== undefined) usePeerChooser(r, fallbackTo(port));
  return DECLINED;
}

function portArg(arg: string): number | undefined {
  const port = Number(arg);
  return Number.isInteger(port) && port >= 1 && port <= 65535 ? port : undefined;
}

export const peerChoiceModule: HttpModule = {
  name: 'ngx_http_peer_choice_test_module',
  directives: [{
    name: 'peer_choice_fallback', contexts: Ctx.LOCATION, args: 1,
    handler(cf, node) {
      const port = portArg(node.args[0]);
      if (port === undefined) return `invalid port "${node.args[0]}"`;
      cf.get(fallbackLoc).port = port;
    },
  }, {
    name: 'peer_choice_footer', contexts: Ctx.LOCATION, args: 1,
    handler(cf, node) {
      cf.get(footerLoc).text = node.args[0];
    },
  }, {
    name: 'peer_choice_upstream_fallback', contexts: Ctx.UPSTREAM, args: 1,
    handler(cf, node) {
      const port = portArg(node.args[0]);
      if (port === undefined) return `invalid port "${node.args[0]}"`;
      setGroupPeerChooser(upstreamGroupOf(cf), fallbackTo(port));
    },
  }],
  variables: [{
    name: 'peer_choice_log', noCache: true,
    get: (r) => (r.ctx.get(LOG_CTX) as string[] | undefined)?.join(' '),
  }],
  postconfiguration(http) {
    // after nginx's access (100) and auth_basic (200): a module listed after them
    http.addPhaseHandler('ACCESS', 300, accessHandler);
    // between ssi (1300) and gzip (1500) on nginx's filter scale: gzip compresses the footer too
    const body: BodyFilterEntry = http.addBodyFilter(1450, (r, chunk, eof) => footerBodyFilter(r, chunk, eof, body));
    http.addHeaderFilter(1450, (r) => footerHeaderFilter(r, body));
  },
};
