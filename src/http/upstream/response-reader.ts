/**
 * Reading the upstream response for one try: collecting and checking the
 * head (at most `proxy_buffer_size` bytes), then — once it is accepted —
 * sending the client's head and decoding the body (Content-Length, chunked,
 * or until close) into the relay. Handles the end cases as nginx does:
 * more data than Content-Length (warned, cut), data after the last chunk,
 * an invalid chunked body or a premature close (the client's response is
 * cut short and its connection closed).
 */
import { finalize, internalRedirect, namedLocation } from '../phases.ts';
import { sendHeaderThen } from '../response.ts';
import { rawSocketSink } from '../http1-response.ts';
import { parseUnsafeUri } from '../subrequest.ts';
import { requestLog } from '../request-log.ts';
import { errorPageConf } from '../core/error-page.ts';
import type { HeaderList } from './module.ts';
import { upstreamRecord } from './module.ts';
import { CHUNKED_AGAIN, CHUNKED_ERROR, ChunkedDecoder } from '../chunked.ts';
import { IGN } from './conf.ts';
import { limitRateOf, ReadRateLimit } from './limit-rate.ts';
import { storeWriter } from './store.ts';
import { BodyRelay } from './relay.ts';
import type { RelaySource } from './relay.ts';
import { BODY_AGAIN, BODY_DONE } from './protocol.ts';
import type { UpstreamBodyDecoder, UpstreamHead } from './protocol.ts';
import { startUpgrade } from './upgrade.ts';
import type { UpstreamRequest } from './upstream-request.ts';

export class ResponseReader implements RelaySource {
  private readonly u: UpstreamRequest;
  private buf: Buffer | undefined;
  private head: UpstreamHead | undefined;
  /** The head was accepted and the body is being relayed. */
  inBody = false;
  /** Body bytes read, framing included (`$upstream_response_length`). */
  bodyBytes = 0;
  private decoder: ChunkedDecoder | undefined;
  /** The protocol's own body framing (FastCGI records), when it has one. */
  private bodyDecoder: UpstreamBodyDecoder | undefined;
  private remaining = -1;
  private keepalive = false;
  private relay: BodyRelay | undefined;
  /** proxy_limit_rate, for a buffered response. */
  private limiter: ReadRateLimit | undefined;
  /** Bytes that arrived while the client's head was being sent. */
  private held: Buffer[] | undefined;
  private upstreamEnded = false;
  private complete = false;
  private readonly out: Buffer[] = [];
  /**
   * nginx's log action for body errors: "reading upstream", but without buffering the bytes that came
   * with the head are filtered while still "reading response header from upstream".
   */
  private action = 'reading upstream';

  constructor(u: UpstreamRequest) {
    this.u = u;
  }

  data(chunk: Buffer): void {
    if (this.held) { this.held.push(chunk); return; }
    if (this.inBody) { this.bodyRead(chunk); return; }
    if (this.complete) return;
    const b = this.buf = this.buf ? Buffer.concat([this.buf, chunk]) : chunk;
    // the protocol's process_header: undefined while incomplete (or invalid, then it has called invalidHeader)
    const head = this.u.protocol.processHeader(this.u, b);
    if (head) this.accept(head, b);
  }

  end(): void {
    if (this.held) { this.upstreamEnded = true; return; }
    if (this.inBody) {
      if (this.complete) return;
      if (this.limiter?.holding) { this.limiter.whenDrained(() => this.end()); return; }
      if (this.remaining === -1 && !this.decoder && !this.bodyDecoder) {
        this.finishBody(false);
        return;
      }
      this.u.log('error', 'upstream prematurely closed connection', this.action);
      this.fail();
      return;
    }
    if (this.complete) return;
    this.u.prematureClose();
  }

  /** The upstream failed while the body was being relayed: cut the client's response short. */
  fail(timedOut = false): void {
    if (this.complete) return;
    this.complete = true;
    this.limiter?.stop();
    this.u.upstreamDone(false);
    if (timedOut) this.relay?.timedOut();
    else this.relay?.fail();
  }

  abort(): void {
    this.complete = true;
    this.limiter?.stop();
    this.relay?.abort();
  }

  private accept(head: UpstreamHead, b: Buffer): void {
    const u = this.u;
    const r = u.r;
    if (u.headerReceived(head.status)) return;
    this.head = head;
    const rec = upstreamRecord(r)!;
    rec.headers = head.headers;
    if (head.status === 404 && u.conf.intercept404) {
      // the head was the whole answer (memcached's END): the connection may serve another request
      u.upstreamDone(!head.connectionClose && b.length === head.bodyStart && !this.upstreamEnded);
      u.finalize(404);
      return;
    }
    if (u.conf.interceptErrors && head.status >= 300 && r.level.get(errorPageConf).pages?.has(head.status)) {
      if (head.status === 401) copyNamed(r, head.headers, 'www-authenticate');
      // the protocol's cache (proxy_cache): an intercepted error is remembered as the key's answer while valid
      u.protocol.cache?.error(u, head);
      u.finalize(head.status);
      return;
    }
    // X-Accel-Limit-Rate (the first one; digits only) is the response's rate, kept through X-Accel-Redirect
    const xal = indexOf(head.headers, 'x-accel-limit-rate');
    if (xal >= 0 && !(u.conf.ignoreHeaders & IGN['X-Accel-Limit-Rate']) && /^\d+$/.test(head.headers.values[xal])) {
      r.limitRate = Number(head.headers.values[xal]);
    }
    const xar = indexOf(head.headers, 'x-accel-redirect');
    if (xar >= 0 && !(u.conf.ignoreHeaders & IGN['X-Accel-Redirect'])) {
      this.accelRedirect(head, head.headers.values[xar]);
      return;
    }
    if (head.http09) {
      this.relayHttp09(b);
      return;
    }
    // the protocol's cache (proxy_cache_use_stale http_NNN): the stale cached response instead of this one
    if (u.protocol.cache?.staleStatus(u, head.status, head)) {
      u.upstreamDone(false);
      return;
    }
    const upgrade = head.status === 101 && r.header('upgrade') !== undefined;
    u.protocol.copyHeaders(u, head);
    const noBody = head.status === 204 || head.status === 304 || u.isHead || head.status < 200;
    this.bodyDecoder = noBody ? undefined : u.protocol.bodyDecoder?.(u, head);
    if (noBody) this.remaining = 0;
    else if (this.bodyDecoder) this.remaining = -1;
    else if (head.chunked) this.decoder = new ChunkedDecoder(u.conf.passTrailers === true);
    else this.remaining = head.contentLength;
    // a protocol that frames its body itself has not reached the body's end yet
    if (this.remaining === 0) this.keepalive = !head.connectionClose && !u.protocol.bodyDecoder;
    let buffering = u.conf.buffering;
    const xab = indexOf(head.headers, 'x-accel-buffering');
    if (xab >= 0 && !(u.conf.ignoreHeaders & IGN['X-Accel-Buffering'])) {
      const v = head.headers.values[xab].toLowerCase();
      if (v === 'no') buffering = false;
      else if (v === 'yes') buffering = true;
    }
    // as nginx: an unbuffered response goes out as it comes, without limit_rate
    if (!buffering) r.limitRate = 0;
    this.relay = new BodyRelay(r, this, u.conf, u.d, buffering, this.remaining, head.chunked);
    const rate = buffering && u.conf.limitRate !== undefined ? limitRateOf(r, u.conf.limitRate) : 0;
    if (rate > 0) {
      this.limiter = new ReadRateLimit(rate, { deliver: (c) => this.body(c), pause: () => u.pauseUpstream(), resume: () => u.resumeUpstream() });
    }
    // the protocol's cache (proxy_cache): the relay also feeds the body to the cache file when the response may be stored
    this.relay.tee = u.protocol.cache?.writer(u, head, b.toString('latin1', 0, head.bodyStart));
    // as nginx (r->disable_not_modified = !u->cacheable): no 304/412 from a response that is not being cached
    if (!this.relay.tee) r.disableNotModified = true;
    // proxy_store (store.ts): the same for the file the response is stored in
    if (u.conf.store) this.relay.tee ??= storeWriter(r, u.conf, head, buffering, u.d.tempPath);
    const rest = b.subarray(head.bodyStart);
    this.buf = undefined;
    // what arrives while an asynchronous header filter runs waits here (afterHeader relays it)
    this.held = rest.length ? [rest] : [];
    u.headerSent();
    sendHeaderThen(r, () => this.afterHeader(upgrade, buffering), (err) => this.headerFailed(err));
  }

  /** The response head went to the client: the body follows (or the tunnel starts). */
  private afterHeader(upgrade: boolean, buffering: boolean): void {
    const u = this.u;
    const r = u.r;
    const held = this.held!;
    this.held = undefined;
    if (upgrade) {
      startUpgrade(u, held);
      return;
    }
    this.inBody = true;
    // proxy_cache (cache.ts): a HEAD sent upstream as GET is read whole into the cache; the client gets no body
    const tee = this.relay!.tee;
    if (r.method === 'HEAD' && this.remaining !== 0 && tee) this.relay!.teeOnly = true;
    else if (!tee && r.method === 'HEAD') {
      // as nginx (r->header_only): the client gets no body, so none is read and what came with the head is dropped
      this.complete = true;
      u.upstreamDone(this.remaining === 0 && held.length === 0 && this.keepalive);
      this.relay!.end();
      return;
    }
    if (!buffering) this.action = 'reading response header from upstream';
    for (const c of held) this.bodyRead(c);
    // without buffering, an upstream close already seen is what nginx's first write to the client finds
    if (!buffering) this.action = 'sending to client';
    if (this.remaining === 0 && !this.complete) this.finishBody(this.keepalive);
    else if (this.upstreamEnded) this.end();
    this.action = 'reading upstream';
  }

  private headerFailed(err: Error): void {
    // a header filter that refused the response logged why itself (the slice filter's checks)
    if (!(err as Error & { logged?: boolean }).logged) this.u.log('error', `sending response header failed: ${err.message}`);
    this.u.finalize(500);
    this.u.r.sink.abort();
  }

  /** Body bytes from the upstream, through proxy_limit_rate when set. */
  private bodyRead(chunk: Buffer): void {
    if (this.limiter) this.limiter.feed(chunk);
    else this.body(chunk);
  }

  private body(chunk: Buffer): void {
    if (this.complete) return;
    this.bodyBytes += chunk.length;
    const relay = this.relay!;
    const own = this.bodyDecoder;
    if (own) {
      const out = this.out;
      const rc = own.feed(chunk, out);
      if (out.length === 1) relay.push(out[0]);
      else if (out.length > 1) relay.push(Buffer.concat(out));
      out.length = 0;
      if (rc === BODY_AGAIN) return;
      if (rc === BODY_DONE) { this.finishBody(own.keepalive); return; }
      this.u.log('error', rc, this.action);
      this.fail();
      return;
    }
    const dec = this.decoder;
    if (dec) {
      const out = this.out;
      const rc = dec.feed(chunk, 0, out);
      if (rc === CHUNKED_ERROR) {
        out.length = 0;
        this.u.log('error', 'upstream sent invalid chunked response', this.action);
        // nginx closes the connection; what it had not flushed yet is never sent
        if (this.u.r.bodyBytesSent === 0) this.u.r.sink.abort();
        this.fail();
        return;
      }
      // what one read brought goes out together (one chunk to the client), as nginx writes it
      if (out.length === 1) relay.push(out[0]);
      else if (out.length > 1) relay.push(Buffer.concat(out));
      out.length = 0;
      if (rc === CHUNKED_AGAIN) return;
      let keep = !this.head!.connectionClose;
      if (rc < chunk.length) {
        this.u.log('warn', 'upstream sent data after final chunk', this.action);
        keep = false;
      }
      if (dec.trailerText) upstreamRecord(this.u.r)!.trailers = parseTrailers(dec.trailerText);
      this.finishBody(keep);
      return;
    }
    if (this.remaining === -1) {
      relay.push(chunk);
      return;
    }
    if (chunk.length > this.remaining) {
      this.u.log('warn', 'upstream sent more data than specified in "Content-Length" header', this.action);
      if (this.remaining > 0) relay.push(chunk.subarray(0, this.remaining));
      this.remaining = 0;
      this.finishBody(false);
      return;
    }
    relay.push(chunk);
    this.remaining -= chunk.length;
    if (this.remaining === 0) this.finishBody(!this.head!.connectionClose);
  }

  private finishBody(keepalive: boolean): void {
    if (this.complete) return;
    this.complete = true;
    this.u.upstreamDone(keepalive);
    this.relay!.end();
  }

  /** X-Accel-Redirect: an internal redirect (or named location) with a few of the upstream's fields kept. */
  private accelRedirect(head: UpstreamHead, target: string): void {
    const u = this.u;
    const r = u.r;
    u.upstreamDone(false);
    u.finalize(0);
    u.headerSent();
    const keep = ['content-type', 'set-cookie', 'content-disposition', 'cache-control', 'expires', 'accept-ranges'];
    const h = head.headers;
    for (let i = 0; i < h.names.length; i++) {
      if (!keep.includes(h.lnames[i])) continue;
      if (h.lnames[i] === 'content-type') r.contentType = h.values[i];
      else r.addHeader(h.names[i], h.values[i]);
    }
    if (target.startsWith('@')) {
      void namedLocation(r, target);
      return;
    }
    // as ngx_http_parse_unsafe_uri: args split off, %XX decoded, `..` segments refused with 404
    const parsed = parseUnsafeUri(r, target);
    if (!parsed) {
      finalize(r, 404).catch((err: Error) => requestLog(r).alert(`finalizing a proxied request failed: ${err.stack ?? err}`));
      return;
    }
    if (r.method !== 'HEAD') r.method = 'GET';
    void internalRedirect(r, parsed.uri, parsed.args);
  }

  /**
   * An HTTP/0.9 answer: nginx takes the request for HTTP/0.9 too and sends
   * no head at all, just the bytes, until the upstream closes.
   */
  private relayHttp09(first: Buffer): void {
    const u = this.u;
    const socket = u.r.sink.socket;
    u.r.status = 200;
    u.headerSent();
    if (!socket) { u.finalize(0); return; }
    this.buf = undefined;
    this.head = undefined;
    this.inBody = true;
    this.remaining = -1;
    this.relay = new BodyRelay(u.r, this, u.conf, u.d, false, -1, false);
    // the bytes go to the socket as they come, past the body filters
    u.r.out = rawSocketSink(socket);
    u.r.bodyFilters = 0;
    this.body(first);
  }

  pauseUpstream(): void {
    if (this.limiter) this.limiter.relayPaused();
    else this.u.pauseUpstream();
  }

  resumeUpstream(): void {
    if (this.limiter) this.limiter.relayResumed();
    else this.u.resumeUpstream();
  }
  relayDone(): void { this.u.relayDone(); }
}

function indexOf(h: HeaderList, lname: string): number {
  return h.lnames.indexOf(lname);
}

function copyNamed(r: UpstreamRequest['r'], h: HeaderList, lname: string): void {
  for (let i = 0; i < h.lnames.length; i++) if (h.lnames[i] === lname) r.addHeader(h.names[i], h.values[i]);
}

function parseTrailers(text: string): HeaderList {
  const list: HeaderList = { names: [], lnames: [], values: [] };
  for (const line of text.split('\n')) {
    const c = line.indexOf(':');
    if (c <= 0) continue;
    const name = line.slice(0, c);
    list.names.push(name);
    list.lnames.push(name.toLowerCase());
    list.values.push(line.slice(c + 1).trim());
  }
  return list;
}
