/**
 * The SSI body filter (nginx's ngx_http_ssi_body_filter): parses the body as
 * it streams through, passes text on, runs commands, and puts the bodies of
 * included subrequests in their places (PostponedOutput) while they run
 * side by side. Parsing stops only for an include that is waited for
 * (wait=yes, set=, file=), as in nginx. What one buffer produced goes on as
 * one write.
 */
import type { Writable } from 'node:stream';
import { EMPTY_CHUNK, nextBodyFilter, resumeBody } from '../../body-filter.ts';
import type { BodyFilterEntry } from '../../body-filter.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import type { RequestLogger } from '../../request-log.ts';
import { PostponedOutput } from '../../postponed-output.ts';
import { mainRequest } from '../../subrequest.ts';
import type { Subrequest } from '../../subrequest.ts';
import { SSI_COMMANDS } from './commands.ts';
import { SSI_ERROR, SSI_MAIN, SSI_OK, SsiMainState } from './context.ts';
import type { SsiContext, SsiRun } from './context.ts';
import { PARSE_AGAIN, PARSE_COMMAND, SsiParser } from './parser.ts';

/** nginx's NGX_HTTP_SSI_MAX_PARAMS. */
const MAX_PARAMS = 16;

const SSI_STRING = Buffer.from('<!--', 'latin1');

/** The SSI state shared by the client's request and its subrequests. */
export function ssiMainState(r: HttpRequest): SsiMainState {
  const main = mainRequest(r);
  let m = main.ctx.get(SSI_MAIN) as SsiMainState | undefined;
  if (!m) {
    m = new SsiMainState();
    main.ctx.set(SSI_MAIN, m);
  }
  return m;
}

export class SsiFilter implements SsiRun {
  readonly r: HttpRequest;
  readonly ctx: SsiContext;
  readonly mctx: SsiMainState;
  readonly log: RequestLogger;
  private readonly main: HttpRequest;
  private readonly self: BodyFilterEntry;
  private readonly output: PostponedOutput;
  private readonly parser: SsiParser;
  private batch: Buffer[] = [];
  private batchBytes = 0;
  private posted: Subrequest[] = [];
  /** Buffers taken but not parsed yet (a command or the output made parsing wait). */
  private queue: Buffer[] = [];
  /** The body's end came after the queued buffers. */
  private queuedEof = false;
  /** Parsing waits (a command, or the output over its limit): writers wait too. */
  private busy = false;
  /** A writer was told to wait: it is resumed when parsing catches up. */
  private toldWait = false;
  private readonly pumpNext = () => this.pump();

  constructor(r: HttpRequest, ctx: SsiContext, self: BodyFilterEntry) {
    this.r = r;
    this.ctx = ctx;
    this.main = mainRequest(r);
    this.mctx = ssiMainState(r);
    this.log = requestLog(r);
    this.self = self;
    this.output = new PostponedOutput(r, self);
    this.parser = new SsiParser(ctx.conf.valueLen, (msg) => this.log.error(msg));
  }

  /** The request is over (the client went away, or an error ended it): nothing more is done. */
  private get gone(): boolean {
    return this.r.finished || this.main.finished || this.r.out.destroyed;
  }

  /** The body filter: a buffer of the body, parsed in turn. */
  write(chunk: Buffer, eof: boolean): boolean {
    if (this.gone) return true;
    this.queue.push(chunk);
    if (eof) this.queuedEof = true;
    if (!this.busy) this.pump();
    if (!this.busy) return true;
    this.toldWait = true;
    return false;
  }

  /** The filters after this one can take more: held output goes on; false while parsing still waits. */
  resume(): boolean {
    this.output.downstreamReady();
    return !this.busy;
  }

  /** Parses queued buffers until one has to wait. */
  private pump(): void {
    this.busy = false;
    while (this.queue.length !== 0) {
      if (this.gone) {
        this.queue = [];
        return;
      }
      const chunk = this.queue.shift()!;
      const last = this.queue.length === 0 && this.queuedEof;
      this.busy = true;
      let pending: Promise<void> | undefined;
      try {
        pending = chunk.length ? this.process(chunk) : undefined;
      } catch (err) {
        this.failed(err as Error);
        return;
      }
      if (pending) {
        pending.then(() => this.parsed(last), (err: Error) => this.failed(err));
        return;
      }
      if (!this.afterBuffer(last)) {
        this.output.whenReady(this.pumpNext);
        return;
      }
      this.busy = false;
    }
    if (this.toldWait) {
      this.toldWait = false;
      resumeBody(this.r, this.self);
    }
  }

  /** A buffer whose parsing waited is done. */
  private parsed(last: boolean): void {
    if (this.gone) return;
    if (this.afterBuffer(last)) this.pump();
    else this.output.whenReady(this.pumpNext);
  }

  private failed(err: Error): void {
    this.log.error(`SSI processing failed: ${err.stack ?? err}`);
    this.queue = [];
    this.main.sink.abort();
  }

  /**
   * After a buffer: its output goes on and posted subrequests start; false
   * when the output asks to wait. At the end of the body, the end goes on
   * once every included body went out (an unfinished "<!--" or command is
   * dropped, as nginx drops it).
   */
  private afterBuffer(last: boolean): boolean {
    const ok = this.flush();
    this.startPosted();
    if (!last) return ok;
    this.output.end(() => nextBodyFilter(this.r, this.self, EMPTY_CHUNK, true));
    return true;
  }

  send(buf: Buffer): void {
    if (buf.length === 0) return;
    this.batch.push(buf);
    this.batchBytes += buf.length;
  }

  /** Sends what was emitted; false when the output asks the writer to wait. */
  private flush(): boolean {
    const batch = this.batch;
    if (batch.length === 0) return true;
    const buf = batch.length === 1 ? batch[0] : Buffer.concat(batch, this.batchBytes);
    this.batch = [];
    this.batchBytes = 0;
    return this.output.write(buf);
  }

  place(): Writable {
    this.flush();
    return this.output.place();
  }

  post(sub: Subrequest): void {
    this.posted.push(sub);
  }

  private startPosted(): void {
    const list = this.posted;
    if (list.length === 0) return;
    this.posted = [];
    for (const sub of list) sub.start();
  }

  async wait(sub: Subrequest): Promise<boolean> {
    this.flush();
    this.startPosted();
    await sub.done;
    return !this.gone;
  }

  /**
   * One buffer of the body (the loop of ngx_http_ssi_body_filter):
   * synchronous unless a command waits, then a promise of the rest.
   */
  private process(buf: Buffer): Promise<void> | undefined {
    const p = this.parser;
    p.pos = 0;
    if (p.inText) { p.copyStart = 0; p.copyEnd = 0; }
    return this.parseFrom(buf);
  }

  private parseFrom(buf: Buffer): Promise<void> | undefined {
    const p = this.parser;
    while (p.pos < buf.length) {
      const rc = p.parse(buf);
      if (p.copyStart !== p.copyEnd) this.text(buf, p.copyStart, p.copyEnd);
      if (p.inText) { p.copyStart = p.pos; p.copyEnd = p.pos; } else { p.copyStart = -1; p.copyEnd = -1; }
      if (rc === PARSE_AGAIN) continue;
      if (rc === PARSE_COMMAND) {
        const result = this.command();
        if (typeof result !== 'number') {
          return result.then((v) => {
            if (this.gone) return undefined;
            if (v !== SSI_OK) this.commandError();
            return this.parseFrom(buf);
          });
        }
        if (result === SSI_OK) continue;
      }
      this.commandError();
    }
    p.saved = p.looked;
    return undefined;
  }

  private commandError(): void {
    if (!this.ctx.conf.silentErrors) this.send(Buffer.from(this.ctx.errmsg, 'latin1'));
  }

  /** Text of the page: sent, kept in the block being defined, or dropped (a false branch). */
  private text(buf: Buffer, start: number, end: number): void {
    const p = this.parser;
    if (this.ctx.output) {
      if (p.saved) {
        this.send(SSI_STRING.subarray(0, p.saved));
        p.saved = 0;
      }
      this.send(buf.subarray(start, end));
      return;
    }
    if (this.ctx.block && p.saved + end - start > 0) {
      this.addToBlock(Buffer.concat([SSI_STRING.subarray(0, p.saved), buf.subarray(start, end)]));
    }
    p.saved = 0;
  }

  private addToBlock(buf: Buffer): void {
    const blocks = this.mctx.blocks;
    blocks[blocks.length - 1]?.bufs.push(buf);
  }

  /** Runs the command just parsed; SSI_OK, SSI_ERROR or a promise of one. */
  private command(): number | Promise<number> {
    const p = this.parser;
    const ctx = this.ctx;
    const name = p.command;
    const cmd = SSI_COMMANDS.get(name);
    if (!cmd) {
      if (!ctx.output) return SSI_OK;
      this.log.error(`invalid SSI command: "${name}"`);
      return SSI_ERROR;
    }
    if (!ctx.output && !cmd.block) {
      if (ctx.block) {
        // inside a block the command is kept as text, to run where the block is used
        let text = `<!--#${name}`;
        for (const prm of p.params) text += ` ${prm.key}="${prm.value}"`;
        this.addToBlock(Buffer.from(text + ' -->', 'latin1'));
        return SSI_OK;
      }
      if (cmd.conditional === 0) return SSI_OK;
    }
    if (cmd.conditional && (ctx.conditional === 0 || ctx.conditional > cmd.conditional)) {
      this.log.error(`invalid context of SSI command: "${name}"`);
      return SSI_ERROR;
    }
    if (p.params.length > MAX_PARAMS) {
      this.log.error(`too many SSI command parameters: "${name}"`);
      return SSI_ERROR;
    }
    const params = new Map<string, string>();
    for (const prm of p.params) {
      if (!cmd.params.includes(prm.key)) {
        this.log.error(`invalid parameter name: "${prm.key}" in "${name}" SSI command`);
        return SSI_ERROR;
      }
      if (params.has(prm.key)) {
        this.log.error(`duplicate "${prm.key}" parameter in "${name}" SSI command`);
        return SSI_ERROR;
      }
      params.set(prm.key, prm.value);
    }
    for (const m of cmd.mandatory) {
      if (!params.has(m)) {
        this.log.error(`mandatory "${m}" parameter is absent in "${name}" SSI command`);
        return SSI_ERROR;
      }
    }
    if (cmd.flush) this.flush();
    return cmd.run(this, params);
  }
}
