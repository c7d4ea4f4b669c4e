/**
 * ngx_http_echo_module (OpenResty's echo-nginx-module): a location's
 * content as a list of commands run in order — `echo` (with `-n` and `--`),
 * `echo_flush`, `echo_sleep`, `echo_duplicate`, `echo_read_request_body`,
 * `echo_request_body`, `echo_location(_async)` (a subrequest's body in
 * place), `echo_exec` (an internal redirect), `echo_reset_timer` — and
 * `echo_before_body`/`echo_after_body`, a filter around any handler's body.
 * Output is held until a flush, a sleep or the end; what a client sees is
 * the same text, the head with default_type and no length (chunked).
 * `load_module ngx_http_echo_module.so` is accepted as built in.
 */
import fs from 'node:fs';
import { Writable } from 'node:stream';
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { cancelBodyDrain, joinBodyFilter, nextBodyFilter, waitBodyDrain } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import { contentTypeFor } from '../core/types.ts';
import { DONE, httpMainOf } from '../http-conf.ts';
import type { HttpModule, LocationConf } from '../http-conf.ts';
import { internalRedirect, logSubrequest, namedLocation } from '../phases.ts';
import type { HttpRequest } from '../request.ts';
import { readRequestBody, requestBodyOf } from '../request-body.ts';
import { bodyDrained, endBody, sendHeader, sendPieces } from '../response.ts';
import { createSubrequest, mainRequest } from '../subrequest.ts';

type Value = ComplexValue<HttpRequest>;

/** One command of a location's list. */
interface Command {
  name: string;
  args: Value[];
  /** echo: no newline (`-n`). */
  noNewline?: boolean;
}

interface EchoLoc {
  before?: Array<{ args: Value[]; noNewline: boolean }>;
  after?: Array<{ args: Value[]; noNewline: boolean }>;
}

const echoLoc = defineSlot<EchoLoc>('echo', () => ({}), inheritUnset);
/** The command list of the location being read (not inherited: the content handler is the location's own). */
const commandLists = new WeakMap<LocationConf, Command[]>();

/** echo's options: `-n` (no newline), `--` (no more options); any other `-x` is text. */
function echoArgs(cf: ConfContext, args: string[]): { args: Value[]; noNewline: boolean } {
  let noNewline = false;
  let i = 0;
  for (; i < args.length; i++) {
    if (args[i] === '-n') noNewline = true;
    else if (args[i] === '--') { i++; break; } else break;
  }
  const vars = httpMainOf(cf).variables;
  return { args: args.slice(i).map((a) => compileComplex(cf, vars, a) as Value), noNewline };
}

function echoText(r: HttpRequest, e: { args: Value[]; noNewline: boolean }): string {
  return e.args.map((v) => v.evaluate(r)).join(' ') + (e.noNewline ? '' : '\n');
}

/** The request's response under construction: held pieces (a subrequest's body arrives later). */
class EchoOutput {
  private readonly r: HttpRequest;
  private pieces: Array<Buffer | Promise<Buffer>> = [];

  constructor(r: HttpRequest) {
    this.r = r;
  }

  write(data: Buffer | Promise<Buffer>): void {
    this.pieces.push(data);
  }

  /** Sends the head (once) and what is held, in order; `flushBuf`: echo_flush's flush buffer follows it. */
  async flush(end = false, flushBuf = false): Promise<void> {
    const r = this.r;
    if (!r.headerSent) {
      if (!r.status) r.status = 200;
      if (r.contentType === undefined) r.contentType = contentTypeFor(r);
      await sendHeader(r);
    }
    const held = this.pieces;
    this.pieces = [];
    const parts = await Promise.all(held);
    if (r.method === 'HEAD') {
      if (end) endBody(r);
      return;
    }
    // the client pushes back: go on once the chain drains (or the client is gone)
    if (!sendPieces(r, parts, end, flushBuf)) await bodyDrained(r);
  }
}

/** A subrequest whose body is collected for the parent's output. */
function subrequestBody(r: HttpRequest, target: string, argsValue: Value | undefined, method = 'GET'): Promise<Buffer> {
  let uri = target;
  let args = argsValue?.evaluate(r) ?? '';
  const q = uri.indexOf('?');
  if (q >= 0) {
    args = uri.slice(q + 1) + (args ? '&' + args : '');
    uri = uri.slice(0, q);
  }
  const chunks: Buffer[] = [];
  const sink = new Writable({ write(chunk: Buffer, _enc, cb) { chunks.push(chunk); cb(); } });
  const sub = createSubrequest(r, uri, args, { sink });
  if (!sub) return Promise.resolve(Buffer.alloc(0));
  sub.r.method = method;
  sub.start();
  return sub.done.then(() => {
    logSubrequest(sub.r);
    return Buffer.concat(chunks);
  });
}

const TIMER = {};

async function runCommands(r: HttpRequest, list: Command[]): Promise<number> {
  const out = new EchoOutput(r);
  const rc = await runRange(r, list, 0, list.length, out);
  if (rc !== undefined) return rc;
  await out.flush(true);
  return DONE;
}

/** $echo_it: the current item of echo_foreach_split. */
const ITEM = {};

/** Commands `from`..`to` (exclusive); a number when the request ends there (echo_exec, a body error). */
async function runRange(r: HttpRequest, list: Command[], from: number, to: number, out: EchoOutput): Promise<number | undefined> {
  for (let i = from; i < to; i++) {
    const c = list[i];
    const args = c.args;
    switch (c.name) {
      case 'echo_foreach_split': {
        let end = i + 1;
        while (end < to && list[end].name !== 'echo_end') end++;
        const delim = args[0].evaluate(r);
        const text = args[1].evaluate(r);
        for (const item of delim ? text.split(delim) : [text]) {
          if (item === '') continue;
          r.ctx.set(ITEM, item);
          const rc = await runRange(r, list, i + 1, end, out);
          if (rc !== undefined) return rc;
        }
        r.ctx.delete(ITEM);
        i = end;
        break;
      }
      case 'echo':
        out.write(Buffer.from(echoText(r, { args, noNewline: !!c.noNewline }), 'latin1'));
        break;
      case 'echo_duplicate': {
        const n = Number(args[0].evaluate(r));
        out.write(Buffer.from(args[1].evaluate(r).repeat(Number.isInteger(n) && n > 0 ? n : 0), 'latin1'));
        break;
      }
      case 'echo_flush':
        await out.flush(false, true);
        break;
      case 'echo_sleep':
      case 'echo_blocking_sleep': {
        await out.flush();
        const s = Number(args[0].evaluate(r));
        await sleepAtLeast(Number.isFinite(s) && s > 0 ? s * 1000 : 0);
        break;
      }
      case 'echo_reset_timer':
        r.ctx.set(TIMER, Date.now());
        break;
      case 'echo_read_request_body': {
        const got = await readRequestBody(r);
        if (typeof got === 'number') return got;
        break;
      }
      case 'echo_request_body': {
        const body = requestBodyOf(r);
        if (body) out.write(body.file ? fs.readFileSync(body.file) : Buffer.concat(body.bufs));
        break;
      }
      case 'echo_location':
        out.write(await subrequestBody(r, args[0].evaluate(r), args[1]));
        break;
      case 'echo_location_async':
        out.write(subrequestBody(r, args[0].evaluate(r), args[1]));
        break;
      case 'echo_subrequest':
      case 'echo_subrequest_async': {
        // method location [-q args]
        const body = subrequestBody(r, args[1].evaluate(r), args[2]?.evaluate(r) === '-q' ? args[3] : undefined,
          args[0].evaluate(r).toUpperCase());
        out.write(c.name === 'echo_subrequest' ? await body : body);
        break;
      }
      case 'echo_status':
        r.status = Number(args[0].evaluate(r)) || 200;
        break;
      case 'echo_exec': {
        const target = args[0].evaluate(r);
        if (target.startsWith('@')) return namedLocation(r, target);
        let uri = target;
        let qs = args[1]?.evaluate(r);
        const q = uri.indexOf('?');
        if (q >= 0) {
          qs = uri.slice(q + 1);
          uri = uri.slice(0, q);
        }
        return internalRedirect(r, uri, qs);
      }
    }
  }
  return undefined;
}

/** A command directive: it adds to the location's list and makes the list its content handler. */
function command(name: string, args: Directive['args'], min = 0): Directive {
  return {
    name, contexts: Ctx.LOCATION | Ctx.LIF, args,
    handler(cf, node) {
      const loc = cf.data.location as LocationConf;
      let list = commandLists.get(loc);
      if (!list) {
        commandLists.set(loc, (list = []));
        const commands = list;
        loc.contentHandler = (r) => runCommands(r, commands);
      }
      if (node.args.length < min) return 'invalid number of arguments';
      if (name === 'echo') {
        const e = echoArgs(cf, node.args);
        list.push({ name, args: e.args, noNewline: e.noNewline });
        return;
      }
      const vars = httpMainOf(cf).variables;
      list.push({ name, args: node.args.map((a) => compileComplex(cf, vars, a) as Value) });
    },
  };
}

function bodyText(field: 'before' | 'after'): Directive {
  return {
    name: field === 'before' ? 'echo_before_body' : 'echo_after_body', contexts: Ctx.LOCATION | Ctx.LIF, args: [0, Infinity],
    handler(cf, node) {
      const conf = cf.get(echoLoc);
      (conf[field] ??= []).push(echoArgs(cf, node.args));
    },
  };
}

/** Per response: the after-body text still to send. */
const AFTER = {};

function echoHeaderFilter(r: HttpRequest, self: BodyFilterEntry): void {
  const conf = r.level.get(echoLoc);
  if (!conf.before && !conf.after) return;
  r.contentLength = undefined;
  joinBodyFilter(r, self);
  r.ctx.set(AFTER, { beforeDone: false });
}

function echoBodyFilter(r: HttpRequest, chunk: Buffer, eof: boolean, self: BodyFilterEntry): boolean {
  const conf = r.level.get(echoLoc);
  const state = r.ctx.get(AFTER) as { beforeDone: boolean };
  const parts: Buffer[] = [];
  if (!state.beforeDone) {
    state.beforeDone = true;
    for (const e of conf.before ?? []) parts.push(Buffer.from(echoText(r, e), 'latin1'));
  }
  parts.push(chunk);
  if (eof) for (const e of conf.after ?? []) parts.push(Buffer.from(echoText(r, e), 'latin1'));
  return nextBodyFilter(r, self, parts.length === 1 ? chunk : Buffer.concat(parts), eof);
}

/** Node's timers count from the loop's cached clock, which can lag Date.now()
 *  by a millisecond: sleep again for what is left, so $echo_timer_elapsed
 *  never reads less than the sleep. */
async function sleepAtLeast(ms: number): Promise<void> {
  const until = Date.now() + ms;
  do await new Promise((resolve) => setTimeout(resolve, Math.max(0, until - Date.now())));
  while (Date.now() < until);
}

export const echoModule: HttpModule = {
  name: 'ngx_http_echo_module',
  directives: [
    command('echo', [0, Infinity]),
    command('echo_duplicate', 2),
    command('echo_flush', 0),
    command('echo_sleep', 1),
    command('echo_reset_timer', 0),
    command('echo_read_request_body', 0),
    command('echo_request_body', 0),
    command('echo_location', [1, 2]),
    command('echo_location_async', [1, 2]),
    command('echo_exec', [1, 2]),
    command('echo_subrequest', [2, 4]),
    command('echo_subrequest_async', [2, 4]),
    command('echo_status', 1),
    command('echo_blocking_sleep', 1),
    command('echo_foreach_split', 2),
    command('echo_end', 0),
    bodyText('before'),
    bodyText('after'),
  ],
  variables: [{
    name: 'echo_it', noCache: true,
    get: (r) => r.ctx.get(ITEM) as string | undefined,
  }, {
    name: 'echo_timer_elapsed', noCache: true,
    get: (r) => {
      const from = (r.ctx.get(TIMER) as number | undefined) ?? r.startMs;
      return ((Date.now() - from) / 1000).toFixed(3);
    },
  }, {
    name: 'echo_request_method', noCache: true, get: (r) => r.method,
  }, {
    name: 'echo_client_request_method', noCache: true, get: (r) => mainRequest(r).method,
  }, {
    name: 'echo_request_uri', noCache: true, get: (r) => r.uri,
  }, {
    name: 'echo_request_body', noCache: true,
    get: (r) => {
      const b = requestBodyOf(r);
      return b && b.file === undefined ? Buffer.concat(b.bufs).toString('latin1') : undefined;
    },
  }, {
    // the client's request line and header lines as they came (the main request's)
    name: 'echo_client_request_headers', noCache: true,
    get: (r) => {
      const m = mainRequest(r);
      let s = `${m.rawRequestLine ?? ''}\r\n`;
      for (let i = 0; i < m.headersIn.length; i += 2) s += `${m.headersIn[i]}: ${m.headersIn[i + 1]}\r\n`;
      return `${s}\r\n`;
    },
  }],
  postconfiguration(http) {
    // a dynamic module's filters come first in nginx's chains (after lua's, loaded before it)
    const body: BodyFilterEntry = http.addBodyFilter(60, (r, chunk, eof) => echoBodyFilter(r, chunk, eof, body));
    http.addHeaderFilter(60, (r) => echoHeaderFilter(r, body));
  },
};
