/**
 * The fastcgi module as the upstream engine's protocol
 * (ngx_http_fastcgi_process_header and ngx_http_fastcgi_input_filter): the
 * response head is the CGI header at the start of STDOUT (a `Status:`
 * field, else 302 with a Location, else 200), STDERR records are logged as
 * nginx does (`FastCGI sent in stderr: "…"`) and, matching
 * fastcgi_catch_stderr, make the response an invalid header; the body is
 * the rest of STDOUT up to END_REQUEST.
 */
import { copyHeaders } from '../proxy/headers-out.ts';
import { BODY_AGAIN, BODY_DONE } from '../../upstream/protocol.ts';
import type { UpstreamBodyDecoder, UpstreamHead, UpstreamProtocol } from '../../upstream/protocol.ts';
import { parseCgiHead } from '../../upstream/response-head.ts';
import type { CgiDerived, CgiLoc } from '../cgi-upstream/conf.ts';
import type { FastcgiLocConf } from './conf.ts';
import { RecordReader } from './records.ts';
import type { RecordSink } from './records.ts';

type FastcgiLoc = CgiLoc<FastcgiLocConf>;
type FastcgiUpstream = Parameters<NonNullable<UpstreamProtocol<FastcgiLoc, CgiDerived>['reinitRequest']>>[0];

/** The text nginx logs for a piece of STDERR: trailing line ends, dots and spaces cut. */
function stderrText(b: Buffer): string {
  let end = b.length;
  while (end > 0) {
    const c = b[end - 1];
    if (c !== 10 && c !== 13 && c !== 0x2e && c !== 0x20) break;
    end--;
  }
  return b.toString('latin1', 0, end);
}

/** One try's reading of the response: the records, the head's text so far, then the body. */
class FastcgiResponse implements RecordSink, UpstreamBodyDecoder {
  readonly records = new RecordReader();
  private readonly u: FastcgiUpstream;
  /** Bytes of `buf` already read into records. */
  pos = 0;
  headText = '';
  /** Set by the head parse when a STDOUT piece completed the head. */
  head: UpstreamHead | undefined;
  /** Where the last STDOUT piece started in the head's buffer, and its length. */
  private pieceAt = 0;
  private pieceLen = 0;
  private inBody = false;
  private out: Buffer[] | undefined;
  stdoutClosed = false;
  caught = false;
  error: string | undefined;
  keepalive = false;
  /** The body bytes the head's Content-Length still allows (-1: no Content-Length). */
  private left = -1;
  private warnedExtra = false;

  constructor(u: FastcgiUpstream) {
    this.u = u;
  }

  stdout(b: Buffer): void {
    if (this.inBody) {
      if (this.left >= 0 && b.length > this.left) {
        // as nginx (ngx_http_fastcgi_input_filter): what goes beyond Content-Length is dropped
        if (!this.warnedExtra) this.u.log('warn', 'upstream sent more data than specified in "Content-Length" header', 'reading upstream');
        this.warnedExtra = true;
        b = b.subarray(0, this.left);
      }
      if (this.left >= 0) this.left -= b.length;
      if (b.length) this.out!.push(b);
      return;
    }
    if (b.length === 0) { this.stdoutClosed = true; return; }
    this.pieceAt = b.byteOffset;
    this.pieceLen = b.length;
    this.headText += b.toString('latin1');
  }

  stderr(b: Buffer): void {
    const text = stderrText(b);
    if (this.inBody) {
      this.u.log('error', `FastCGI sent in stderr: "${text}"`, 'reading upstream');
      return;
    }
    this.u.log('error', `FastCGI sent in stderr: "${text}"`);
    const catchers = this.u.conf.catchStderr;
    if (catchers && catchers.some((c) => text.includes(c))) this.caught = true;
  }

  end(): void {
    this.keepalive = this.u.conf.keepConn === true;
  }

  bad(message: string): void {
    this.error = message;
  }

  /** The head, once STDOUT holds a complete one; `buf` is every byte of this try so far. */
  readHead(buf: Buffer): UpstreamHead | undefined {
    const u = this.u;
    for (;;) {
      const before = this.headText.length;
      this.pos = this.records.feed(buf, this.pos, this, () => this.headText.length !== before);
      if (this.error) { u.log('error', this.error); u.invalidHeader(); return undefined; }
      if (this.caught) { u.invalidHeader(); return undefined; }
      if (this.headText.length !== before) {
        const head = parseCgiHead(this.headText, false, (m) => u.log('warn', m));
        if (head && 'error' in head) { u.log('error', head.error); u.invalidHeader(); return undefined; }
        if (head) {
          // the body starts inside the STDOUT piece that completed the head
          const rest = this.headText.length - head.bodyStart;
          const start = this.pieceAt - buf.byteOffset + this.pieceLen - rest;
          this.records.contentLeft += this.pos - (this.pieceAt - buf.byteOffset + this.pieceLen) + rest;
          this.pos = start;
          head.bodyStart = start;
          head.connectionClose = !u.conf.keepConn;
          this.left = head.contentLength;
          return head;
        }
        if (this.headText.length >= u.conf.bufferSize) {
          u.log('error', 'upstream sent too big header');
          u.invalidHeader();
          return undefined;
        }
        continue;
      }
      if (this.records.done || this.stdoutClosed) {
        u.log('error', 'upstream prematurely closed FastCGI stdout');
        u.invalidHeader();
      }
      return undefined;
    }
  }

  feed(chunk: Buffer, out: Buffer[]): typeof BODY_AGAIN | typeof BODY_DONE | string {
    this.inBody = true;
    this.out = out;
    this.records.feed(chunk, 0, this);
    this.out = undefined;
    if (this.error) return this.error;
    // a body shorter than its Content-Length: cut short, as nginx
    if (this.records.done && this.left > 0) return 'upstream prematurely closed FastCGI request';
    return this.records.done ? BODY_DONE : BODY_AGAIN;
  }
}

const responses = new WeakMap<object, FastcgiResponse>();

export const fastcgiProtocol: UpstreamProtocol<FastcgiLoc, CgiDerived> = {
  processHeader(u, buf) {
    let resp = responses.get(u);
    // a new try's buffer starts over
    if (!resp || buf.length < resp.pos) responses.set(u, (resp = new FastcgiResponse(u)));
    return resp.readHead(buf);
  },
  copyHeaders: (u, head) => copyHeaders(u.r, head, u.d, u.conf.ignoreHeaders),
  bodyDecoder(u) {
    return responses.get(u)!;
  },
  reinitRequest(u) {
    responses.delete(u);
  },
};
