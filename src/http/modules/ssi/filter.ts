/**
 * The SSI body filter (nginx's ngx_http_ssi_body_filter): parses the body as
 * it streams through, passes text on, runs commands, and puts the bodies of
 * included subrequests in their places (PostponedOutput) while they run
 * side by side. Parsing stops only for an include that is waited for
 * (wait=yes, set=, file=), as in nginx. What one buffer produced goes on as
 * one write.
 */
import { Writable } from 'node:stream';
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

export class SsiFilter extends Writable implements SsiRun {
  readonly r: HttpRequest;
  readonly ctx: SsiContext;
  readonly mctx: SsiMainState;
  readonly log: RequestLogger;
  private readonly main: HttpRequest;
  private readonly next: Writable;
  private readonly output: PostponedOutput;
  private readonly parser: SsiParser;
  private batch: Buffer[] = [];
  private batchBytes = 0;
  private posted: Subrequest[] = [];

  constructor(r: HttpRequest, ctx: SsiContext, next: Writable) {
    super();
    this.r = r;
    this.ctx = ctx;
    this.main = mainRequest(r);
    this.mctx = ssiMainState(r);
    this.log = requestLog(r);
    this.next = next;
    this.output = new PostponedOutput(next);
    this.parser = new SsiParser(ctx.conf.valueLen, (msg) => this.log.error(msg));
  }

  /** The request is over (the client went away, or an error ended it): nothing more is done. */
  private get gone(): boolean {
    return this.r.finished || this.main.finished || this.next.destroyed;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.gone) { cb(); return; }
    this.process(chunk).then(() => this.afterBuffer()).then(() => cb(), (err: Error) => {
      this.log.error(`SSI processing failed: ${err.stack ?? err}`);
      this.main.res.destroy();
      cb();
    });
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (this.gone) { cb(); return; }
    // an unfinished "<!--" or command at the end is dropped, as nginx drops it
    this.flush();
    this.startPosted();
    this.output.end(() => {
      this.next.end();
      cb();
    });
  }

  /** After a buffer: its output goes on, posted subrequests start, and a full output makes the writer wait. */
  private async afterBuffer(): Promise<void> {
    const ok = this.flush();
    this.startPosted();
    if (!ok) await this.output.drained();
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

  /** One buffer of the body (the loop of ngx_http_ssi_body_filter). */
  private async process(buf: Buffer): Promise<void> {
    const p = this.parser;
    p.pos = 0;
    if (p.inText) { p.copyStart = 0; p.copyEnd = 0; }
    while (p.pos < buf.length) {
      const rc = p.parse(buf);
      if (p.copyStart !== p.copyEnd) this.text(buf, p.copyStart, p.copyEnd);
      if (p.inText) { p.copyStart = p.pos; p.copyEnd = p.pos; } else { p.copyStart = -1; p.copyEnd = -1; }
      if (rc === PARSE_AGAIN) continue;
      if (rc === PARSE_COMMAND) {
        let result = this.command();
        if (typeof result !== 'number') result = await result;
        if (this.gone) return;
        if (result === SSI_OK) continue;
      }
      if (!this.ctx.conf.silentErrors) this.send(Buffer.from(this.ctx.errmsg, 'latin1'));
    }
    p.saved = p.looked;
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
