/**
 * ngx_http_mirror_module: `mirror uri|off` (repeatable) starts, in the
 * precontent phase, a background subrequest per URI with the request's
 * method and arguments, whose response is thrown away;
 * `mirror_request_body on|off` (on by default) reads the client's body
 * first, so the mirrors get it.
 *
 * The client's response does not wait for the mirrors, but the request does
 * not end before they do, as in nginx (whose request count keeps the
 * connection): the head and every body byte go out at once, while the end of
 * the response — and with it the access log line, keepalive and the next
 * request on the connection — waits for the last mirror.
 */
import { Writable } from 'node:stream';
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import { flagArg } from '../../conf/values.ts';
import { setting } from '../../conf/setters.ts';
import { DECLINED } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import { logSubrequest } from '../phases.ts';
import type { HttpRequest } from '../request.ts';
import { readRequestBody } from '../request-body.ts';
import type { BodySink } from '../response-sink.ts';
import { createSubrequest } from '../subrequest.ts';

interface MirrorConf {
  /** The URIs to mirror to; empty for `mirror off`. */
  uris?: string[];
  requestBody?: boolean;
}

const MIRROR_DEFAULTS = { uris: [] as string[], requestBody: true };

const mirrorSlot = defineSlot<MirrorConf, typeof MIRROR_DEFAULTS>('mirror', () => ({}), inheritUnset, MIRROR_DEFAULTS);

/** `mirror uri` adds to this level's list; `mirror off` is a list of none, and either twice with off is duplicate. */
function readMirror(cf: ConfContext, node: ConfNode): string | undefined {
  const c = cf.get(mirrorSlot);
  const own = Object.hasOwn(c, 'uris') ? c.uris : undefined;
  if (node.args[0] === 'off') {
    if (own !== undefined) return 'is duplicate';
    c.uris = [];
    return undefined;
  }
  if (own !== undefined && own.length === 0) return 'is duplicate';
  if (own === undefined) c.uris = [node.args[0]];
  else own.push(node.args[0]);
  return undefined;
}

/**
 * The client's sink with its end held back until `pending` settles: bytes
 * and the head go out now, the end (and so the request's end) later.
 */
class EndAfter implements BodySink {
  private readonly inner: BodySink;
  private readonly r: HttpRequest;
  private readonly pending: Promise<unknown>;
  private ending = false;

  constructor(r: HttpRequest, inner: BodySink, pending: Promise<unknown>) {
    this.r = r;
    this.inner = inner;
    this.pending = pending;
  }

  get destroyed(): boolean {
    return this.inner.destroyed;
  }

  get ended(): boolean {
    return this.ending;
  }

  write(chunk: Buffer): boolean {
    return this.inner.write(chunk);
  }

  onceDrain(fn: () => void): void {
    this.inner.onceDrain(fn);
  }

  end(chunk?: Buffer): void {
    if (this.ending) return;
    this.ending = true;
    if (chunk !== undefined && chunk.length) this.inner.write(chunk);
    // a response without body bytes: its head goes out now, not with the end
    if (!this.r.sink.destroyed) this.r.sink.flushHead();
    void this.pending.then(() => this.inner.end());
  }
}

/** A subrequest sink that keeps nothing. */
function discardSink(): Writable {
  return new Writable({ write(_chunk, _enc, cb) { cb(); } });
}

function mirrorHandler(r: HttpRequest): number | Promise<number> {
  if (r.parent) return DECLINED;
  const conf = r.level.get(mirrorSlot);
  if (conf.uris.length === 0) return DECLINED;
  if (!conf.requestBody) return startMirrors(r, conf.uris);
  return readRequestBody(r).then((got) => (typeof got === 'number' ? got : startMirrors(r, conf.uris)));
}

function startMirrors(r: HttpRequest, uris: string[]): number {
  const done: Array<Promise<unknown>> = [];
  for (const uri of uris) {
    const sub = createSubrequest(r, uri, r.args, { sink: discardSink() });
    if (!sub) return 500;
    const sr = sub.r;
    sr.method = r.method;
    sub.start();
    done.push(sub.done.then(() => logSubrequest(sr)));
  }
  r.out = new EndAfter(r, r.out, Promise.all(done));
  return DECLINED;
}

export const mirrorModule: HttpModule = {
  name: 'ngx_http_mirror_module',
  directives: [
    { name: 'mirror', contexts: HTTP_ANY, args: 1, handler: readMirror },
    { name: 'mirror_request_body', contexts: HTTP_ANY, args: 'flag', handler: setting(mirrorSlot, 'requestBody', flagArg) },
  ],
  postconfiguration(http) {
    // after try_files (100): nginx's module list has mirror before try_files, and each phase runs the last registered first
    http.addPhaseHandler('PRECONTENT', 200, mirrorHandler);
  },
};
