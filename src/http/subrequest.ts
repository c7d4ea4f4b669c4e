/**
 * Subrequests (nginx's ngx_http_subrequest): an internal GET for a URI, run
 * through the phases on the parent's connection, with the parent's request
 * head and headers and the parent's variable cache (nginx shares
 * r->variables), but a URI, arguments, module contexts and a response of its
 * own. The response head goes nowhere; the body goes into a sink its creator
 * gives: a place in the parent's output (src/http/postponed-output.ts,
 * nginx's postpone filter) or a buffer (SSI's `include ... set=`).
 *
 * Subrequests skip the access phase and are not logged, as in nginx. An
 * error once a subrequest's body has started (its response destroyed) ends
 * the client's request, as ngx_http_terminate_request does.
 */
import { EventEmitter } from 'node:events';
import type { Writable } from 'node:stream';
import { SinkListeners } from './response-sink.ts';
import type { ResponseSink } from './response-sink.ts';
import { Phase } from './http-conf.ts';
import { finalize, runPhases } from './phases.ts';
import { HttpRequest } from './request.ts';
import { endBody } from './response.ts';
import { requestLog } from './request-log.ts';
import { setSubrequestBody } from './request-body.ts';
import { RequestBodySource } from './request-body-source.ts';

/** nginx's NGX_HTTP_MAX_SUBREQUESTS + 1: how deep subrequests may nest. */
const MAX_DEPTH = 51;
/** nginx's request reference counter limit (65535 - 1000). */
const MAX_LIVE = 64535;

export interface SubrequestOptions {
  /** Where the response body goes. */
  sink: Writable;
  /**
   * nginx's post_subrequest handler: called when the subrequest is finalized
   * with a status before its head was sent (404, 502, ...). Returns true when
   * it answered the subrequest itself (SSI's `stub=`).
   */
  onFinalize?(sr: HttpRequest, rc: number): boolean | Promise<boolean>;
  /** The body is captured in memory (nginx's NGX_HTTP_SUBREQUEST_IN_MEMORY): no subrequest may nest in it. */
  inMemory?: boolean;
  /**
   * Called once, as the body ends (before the sink hears of it) or when the
   * subrequest is cut short: nginx finalizes (and logs) a subrequest before
   * its parent goes on with what follows.
   */
  onBodyEnd?(sr: HttpRequest): void;
  /**
   * A request body of its own instead of the parent's (ngx.location.capture's
   * `body`): its bytes, with a Content-Length of their size in place of the
   * parent's; null: no body and no Content-Length.
   */
  requestBody?: Buffer | null;
  /** Request headers of its own, copied from the parent's (OpenResty's captures): changing them leaves the parent's alone. */
  copyHeaders?: boolean;
  /**
   * The parent's variable values: shared (nginx's default), copied as they
   * are now, or none (OpenResty's captures without share_all_vars).
   */
  variables?: 'share' | 'copy' | 'own';
  /**
   * An error in it ends only it, and the client's request goes on (OpenResty's
   * captures: their post_subrequest handler turns NGX_ERROR into a result).
   */
  contained?: boolean;
  /** Whose subrequest it is in the log line for a cycle (`lua ` for OpenResty's copy of ngx_http_subrequest). */
  logPrefix?: string;
}

interface SubState {
  /** Subrequests that may still nest below this request (nginx's r->subrequests). */
  left: number;
  inMemory: boolean;
  sub: Subrequest | undefined;
}

/** Per client request: its subrequests still running, so they end when the client goes away. */
interface MainState {
  live: Set<Subrequest>;
}

/**
 * The client connection as a subrequest's modules see it (the proxy watches
 * r.sink.client to notice a client that goes away): each subrequest has its
 * own, told when the client closes or sends FIN, so every subrequest
 * running hears of it.
 */
class SubrequestSocket extends EventEmitter {
  readableEnded = false;
}

const states = new WeakMap<HttpRequest, SubState>();
const mains = new WeakMap<HttpRequest, MainState>();

/** The client's request a (sub)request belongs to (nginx's r->main). */
export function mainRequest(r: HttpRequest): HttpRequest {
  let m = r;
  while (m.parent) m = m.parent;
  return m;
}

function stateOf(r: HttpRequest): SubState {
  let s = states.get(r);
  if (!s) {
    s = { left: MAX_DEPTH, inMemory: false, sub: undefined };
    states.set(r, s);
  }
  return s;
}

/**
 * A subrequest's request: its parent's head, headers and body (nginx's), or
 * copies of the head and headers (copyHeaders), or a body of its own with a
 * Content-Length of its size instead of the parent's framing (requestBody).
 */
function requestOf(parent: HttpRequest, opts: SubrequestOptions): Pick<HttpRequest, 'head' | 'headersIn' | 'body'> {
  const own = opts.requestBody;
  if (own === undefined && !opts.copyHeaders) return parent;
  const framing = own === undefined ? {} : { contentLength: own ? own.length : -1, chunked: false };
  const head = Object.assign(Object.create(Object.getPrototypeOf(parent.head) as object), parent.head, framing) as HttpRequest['head'];
  if (own === undefined) return { head, headersIn: parent.headersIn.slice(), body: parent.body };
  const headersIn = own ? ['Content-Length', String(own.length)] : [];
  for (let i = 0; i < parent.headersIn.length; i += 2) {
    const name = parent.headersIn[i].toLowerCase();
    if (name !== 'content-length' && name !== 'transfer-encoding') headersIn.push(parent.headersIn[i], parent.headersIn[i + 1]);
  }
  return { head, headersIn, body: RequestBodySource.empty() };
}

export class Subrequest {
  readonly r: HttpRequest;
  /** Resolves when the subrequest is over: true when its body ended, false when it was cut short. */
  readonly done: Promise<boolean>;
  private onBodyEnd: SubrequestOptions['onBodyEnd'];
  private resolve!: (ok: boolean) => void;
  private over = false;
  private readonly res: SubrequestResponse;
  private readonly socket = new SubrequestSocket();
  private readonly main: HttpRequest;
  private readonly contained: boolean;

  constructor(parent: HttpRequest, uri: string, args: string, opts: SubrequestOptions) {
    this.main = mainRequest(parent);
    this.contained = opts.contained === true;
    this.onBodyEnd = opts.onBodyEnd;
    this.done = new Promise((resolve) => { this.resolve = resolve; });
    this.res = new SubrequestResponse(this, opts.sink, this.socket);
    const { head, headersIn, body } = requestOf(parent, opts);
    const sr = new HttpRequest(parent.conn, parent.main, parent.server, head, headersIn, this.res, body);
    if (opts.requestBody !== undefined) setSubrequestBody(sr, opts.requestBody ? [opts.requestBody] : []);
    sr.parent = parent;
    sr.method = 'GET';
    sr.uri = uri;
    sr.args = args;
    sr.hasArgs = args !== '';
    sr.internal = true;
    sr.expectTested = true;
    // nginx's sr->variables = r->variables: cached values are shared with the parent
    const vars = opts.variables ?? 'share';
    sr.varCache = vars === 'share' ? parent.varCache : vars === 'copy' ? parent.varCache.slice() : [];
    sr.captures = undefined;
    this.r = sr;
    opts.sink.once('finish', () => this.complete());
    opts.sink.once('close', () => this.abort());
  }

  /** The body ended or was cut short: the creator's onBodyEnd, once. */
  bodyEnded(): void {
    const fn = this.onBodyEnd;
    this.onBodyEnd = undefined;
    fn?.(this.r);
  }

  /**
   * Runs the subrequest's phases: from server rewrite, as any internal
   * request, or from `phase` (a clone of its parent, as the slice filter's
   * NGX_HTTP_SUBREQUEST_CLONE, starts at the content phase).
   */
  start(phase: number = Phase.SERVER_REWRITE): void {
    const sr = this.r;
    runPhases(sr, phase)?.catch((err: Error) => {
      requestLog(sr).error(`unexpected error: ${err.stack ?? err}`);
      if (!sr.headerSent) finalize(sr, 500).catch(() => this.res.abort());
      else this.res.abort();
    });
  }

  /** The body went into the sink whole. */
  private complete(): void {
    if (this.over) return;
    this.over = true;
    this.forget();
    this.r.finished = true;
    this.r.completed = true;
    const res = this.res;
    res.finished = true;
    res.fireFinish();
    res.fireClose();
    this.resolve(true);
  }

  /** The subrequest was cut short (its client went away, or an error ended it). */
  abort(): void {
    if (this.over) return;
    this.over = true;
    this.forget();
    this.r.finished = true;
    const res = this.res;
    if (!res.destroyed) {
      res.destroyed = true;
      res.fireClose();
    }
    this.socket.emit('close');
    this.bodyEnded();
    this.resolve(false);
  }

  /** The client sent FIN. */
  clientEnded(): void {
    this.socket.readableEnded = true;
    this.socket.emit('end');
  }

  /** An error in the subrequest after its head: the client's request ends too (unless contained). */
  terminate(): void {
    const wasOver = this.over;
    this.abort();
    if (!wasOver && !this.contained) this.main.sink.abort();
  }

  private forget(): void {
    mains.get(this.main)?.live.delete(this);
  }

  register(): boolean {
    let m = mains.get(this.main);
    if (!m) {
      const state: MainState = { live: new Set() };
      m = state;
      mains.set(this.main, m);
      // the client sent FIN, or went away: every subrequest still running hears of it
      const socket = this.main.head.version < 2000 ? this.main.sink.client : null;
      const ended = () => { for (const s of [...state.live]) s.clientEnded(); };
      socket?.on('end', ended);
      this.main.sink.onClose(() => {
        socket?.off('end', ended);
        // after the whole response went out (ngx.eof), subrequests still running finish (nginx
        // keeps the request until they do); only a response cut short aborts them
        if (this.main.sink.finished) return;
        for (const s of [...state.live]) s.abort();
      });
    }
    if (m.live.size >= MAX_LIVE) return false;
    m.live.add(this);
    return true;
  }
}

/**
 * A subrequest's response sink: the head goes nowhere, the body into the
 * sink its creator gave; there is no socket to take over (an upgrade or an
 * HTTP/0.9 relay sees none). Aborting it ends the client's request.
 */
class SubrequestResponse extends SinkListeners implements ResponseSink {
  destroyed = false;
  finished = false;
  readonly socket = null;
  readonly client: SubrequestSocket;
  private readonly sub: Subrequest;
  private readonly target: Writable;

  constructor(sub: Subrequest, target: Writable, client: SubrequestSocket) {
    super();
    this.sub = sub;
    this.target = target;
    this.client = client;
  }

  get headersSent(): boolean {
    return this.sub.r.headerSent;
  }

  get ended(): boolean {
    return this.target.writableEnded;
  }

  sendHead(): void {}
  flushHead(): void {}
  writeContinue(): void {}
  setTrailers(): void {}

  write(chunk: Buffer): boolean {
    return this.target.write(chunk);
  }

  end(chunk?: Buffer): void {
    if (this.target.writableEnded) return;
    this.sub.bodyEnded();
    if (chunk !== undefined) this.target.end(chunk);
    else this.target.end();
  }

  onceDrain(fn: () => void): void {
    this.target.once('drain', fn);
  }

  abort(): void {
    if (!this.destroyed) this.sub.terminate();
  }

  get bytesSent(): number {
    return 0;
  }

  get bodyBytesSent(): number {
    return 0;
  }
}

/**
 * Creates a subrequest of `parent` for `uri` and `args` (decoded path and
 * query string); start() runs it. Returns undefined, with nginx's error
 * log line, when subrequests nest too deep.
 */
export function createSubrequest(parent: HttpRequest, uri: string, args: string, opts: SubrequestOptions): Subrequest | undefined {
  const ps = stateOf(parent);
  if (ps.left === 0) {
    requestLog(parent).error(`${opts.logPrefix ?? ''}subrequests cycle while processing "${uri}"`);
    return undefined;
  }
  if (ps.inMemory) {
    requestLog(parent).error(`nested in-memory subrequest "${uri}"`);
    return undefined;
  }
  const sub = new Subrequest(parent, uri, args, opts);
  if (!sub.register()) {
    requestLog(parent).crit(`request reference counter overflow while processing "${uri}"`);
    return undefined;
  }
  states.set(sub.r, { left: ps.left - 1, inMemory: opts.inMemory === true, sub });
  if (opts.onFinalize) sub.r.postSubrequest = opts.onFinalize;
  return sub;
}

/**
 * nginx's ngx_http_parse_unsafe_uri: splits `?args` off a URI given by a
 * module (SSI's include), decodes %XX in the path, and refuses `..`
 * segments and NUL bytes. Returns undefined for an unsafe URI (and logs it).
 */
export function parseUnsafeUri(r: HttpRequest, text: string): { uri: string; args: string } | undefined {
  let uri = text;
  let args = '';
  let quoted = false;
  const unsafe = () => {
    requestLog(r).error(`unsafe URI "${uri}" was detected`);
    return undefined;
  };
  if (uri === '' || uri[0] === '?' || dotDot(uri, 0)) return unsafe();
  for (let i = 0; i < uri.length; i++) {
    const ch = uri[i];
    if (ch === '%') { quoted = true; continue; }
    if (ch === '?') {
      args = uri.slice(i + 1);
      uri = uri.slice(0, i);
      break;
    }
    if (ch === '\0') return unsafe();
    if (ch === '/' && dotDot(uri, i + 1)) return unsafe();
  }
  if (!quoted) return { uri, args };
  uri = unescape(uri);
  if (dotDot(uri, 0)) return unsafe();
  for (let i = 0; i < uri.length; i++) {
    if (uri[i] === '\0' || (uri[i] === '/' && dotDot(uri, i + 1))) return unsafe();
  }
  return { uri, args };
}

/** `..` at `i`, followed by the end or a slash. */
function dotDot(s: string, i: number): boolean {
  return s[i] === '.' && s[i + 1] === '.' && (i + 2 === s.length || s[i + 2] === '/');
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x66 ? l - 0x57 : -1;
}

/** ngx_unescape_uri with no flags: every %XX decoded; a broken escape drops its `%` (and bad first digit). */
function unescape(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] !== '%') { out += s[i]; continue; }
    const hi = hexValue(s.charCodeAt(i + 1));
    if (hi < 0) { if (i + 1 < s.length) out += s[i + 1]; i++; continue; }
    const lo = hexValue(s.charCodeAt(i + 2));
    if (lo < 0) { if (i + 2 < s.length) out += s[i + 2]; i += 2; continue; }
    out += String.fromCharCode(hi * 16 + lo);
    i += 2;
  }
  return out;
}
