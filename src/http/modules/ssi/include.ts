/**
 * The SSI `include` command: a subrequest whose body is placed in the page,
 * waited for (wait=yes, file=), kept in a variable (set=), or replaced by a
 * block (stub=) when it fails or is empty.
 */
import { Writable } from 'node:stream';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { endBody, sendBody, sendHeader } from '../../response.ts';
import { createSubrequest, parseUnsafeUri } from '../../subrequest.ts';
import { logSubrequest } from '../../phases.ts';
import type { Subrequest } from '../../subrequest.ts';
import { coreLoc, CORE_LOC_DEFAULTS } from '../../core/settings.ts';
import { SSI_ERROR, SSI_OK } from './context.ts';
import type { SsiBlock, SsiParams, SsiRun } from './context.ts';
import { ADD_PREFIX, evaluate } from './evaluate.ts';

export function include(f: SsiRun, p: SsiParams): number | Promise<number> {
  let uri = p.get('virtual');
  const file = p.get('file');
  let wait = p.get('wait');
  const set = p.get('set');
  const stub = p.get('stub');
  if (uri !== undefined && file !== undefined) {
    f.log.error(`inclusion may be either virtual="${uri}" or file="${file}"`);
    return SSI_ERROR;
  }
  if (uri === undefined && file === undefined) {
    f.log.error('no parameter in "include" SSI command');
    return SSI_ERROR;
  }
  if (set !== undefined && stub !== undefined) {
    f.log.error('"set" and "stub" cannot be used together in "include" SSI command');
    return SSI_ERROR;
  }
  if (wait !== undefined) {
    if (uri === undefined) {
      f.log.error(`"wait" cannot be used with file="${file}"`);
      return SSI_ERROR;
    }
    if (wait.toLowerCase() === 'no') wait = undefined;
    else if (wait.toLowerCase() !== 'yes') {
      f.log.error(`invalid value "${wait}" in the "wait" parameter`);
      return SSI_ERROR;
    }
  }
  // file= is a virtual include that is always waited for
  if (uri === undefined) { uri = file!; wait = 'yes'; }
  const text = evaluate(f, uri, ADD_PREFIX);
  if (text === undefined) return SSI_ERROR;
  const target = parseUnsafeUri(f.r, text);
  if (!target) return SSI_ERROR;

  let block: SsiBlock | undefined;
  if (stub !== undefined) {
    block = f.mctx.blocks.find((b) => b.name === stub);
    if (!block) {
      f.log.error(`"stub"="${stub}" for "include" not found`);
      return SSI_ERROR;
    }
  }
  let memory: MemorySink | undefined;
  let setName: string | undefined;
  if (set !== undefined) {
    setName = set.toLowerCase();
    if (!f.mctx.variables.has(setName)) f.mctx.variables.set(setName, '');
    memory = new MemorySink();
  }
  const place = memory ? undefined : f.place();
  const sink = memory ?? (block ? new StubSink(place!, block) : place!);
  const sub = createSubrequest(f.r, target.uri, target.args, {
    sink,
    inMemory: memory !== undefined,
    onFinalize: block ? (sr) => stubOutput(sr, block) : undefined,
    // logged as its body ends, before the page goes on
    onBodyEnd: logSubrequest,
  });
  if (!sub) {
    place?.end();
    return SSI_ERROR;
  }
  if (memory) memory.sub = sub;
  f.post(sub);
  if (wait === undefined && set === undefined) return SSI_OK;
  return f.wait(sub).then((alive) => {
    if (alive && memory && setName !== undefined) {
      const sr = sub.r;
      if (sr.headerSent && sr.status < 300 && !memory.tooBig) f.mctx.variables.set(setName, memory.value());
    }
    return SSI_OK;
  });
}

/** `stub=`: the block goes out as the subrequest's response when it ends with an error status. */
async function stubOutput(sr: HttpRequest, block: SsiBlock): Promise<boolean> {
  sr.contentType = sr.parent!.contentType;
  await sendHeader(sr);
  for (const b of block.bufs) sendBody(sr, b);
  endBody(sr);
  return true;
}

/** A stub include's body: the block goes in its place when the response body is empty. */
class StubSink extends Writable {
  private readonly next: Writable;
  private readonly block: SsiBlock;
  private bytes = 0;

  constructor(next: Writable, block: SsiBlock) {
    super();
    this.next = next;
    this.block = block;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.bytes += chunk.length;
    if (this.next.write(chunk)) cb();
    else this.next.once('drain', () => cb());
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (this.bytes === 0) for (const b of this.block.bufs) this.next.write(b);
    this.next.end(cb);
  }
}

/** The body of an `include ... set=` subrequest, kept in memory up to the limit. */
class MemorySink extends Writable {
  sub: Subrequest | undefined;
  tooBig = false;
  private readonly chunks: Buffer[] = [];
  private bytes = 0;

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.tooBig) { cb(); return; }
    const sr = this.sub!.r;
    // subrequest_output_buffer_size of the location that answers
    const limit = sr.level.get(coreLoc).subrequestOutputBufferSize;
    const declared = sr.contentLength;
    if (this.bytes === 0 && declared !== undefined && declared > limit) return this.fail(`too big subrequest response: ${declared}`, cb);
    if (this.bytes + chunk.length > limit) return this.fail('too big subrequest response', cb);
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    cb();
  }

  /** nginx fails the subrequest, which ends the client's request. */
  private fail(msg: string, cb: () => void): void {
    this.tooBig = true;
    const sr = this.sub?.r;
    if (sr) {
      requestLog(sr).error(msg);
      sr.sink.abort();
    }
    cb();
  }

  value(): string {
    return Buffer.concat(this.chunks, this.bytes).toString('latin1');
  }
}

