/**
 * The subject of an ngx.re call as the JavaScript regex sees it: Lua strings
 * are bytes (held as latin1 strings); with `u`/`U` the text is the decoded
 * UTF-8 and offsets are mapped between byte offsets (Lua's) and text
 * indexes (the regex's). With `u`, PCRE's UTF-8 checks (src/lua/re.ts).
 */
import { isUtf8 } from 'node:buffer';

/** PCRE's pcre_exec() errors for a subject that is not UTF-8, and for a start inside a character. */
const BAD_UTF8 = 'pcre_exec() failed: -10';
const BAD_UTF8_OFFSET = 'pcre_exec() failed: -11';

/** A pcre_exec() failure, returned to Lua as the error. */
export class ExecError extends Error {}

/** A subject as matched: `text` is the latin1 view, or the decoded text in UTF-8 mode. */
export class Subject {
  readonly bytes: string;
  readonly text: string;
  readonly utf8: boolean;
  private readonly check: boolean;
  private readonly valid: boolean;
  /** `utf8`: the u or U option; `check`: u's UTF-8 check (U checks nothing). */
  constructor(bytes: string, utf8: boolean, check: boolean) {
    this.bytes = bytes;
    this.utf8 = utf8;
    this.check = check;
    const buffer = utf8 ? Buffer.from(bytes, 'latin1') : undefined;
    this.text = buffer ? buffer.toString('utf8') : bytes;
    this.valid = !check || isUtf8(buffer!);
  }
  /** What PCRE's UTF-8 check says of a search from `byteStart`, when it objects. */
  refusal(byteStart: number): string | undefined {
    if (!this.check) return undefined;
    if (!this.valid) return BAD_UTF8;
    const code = this.bytes.charCodeAt(byteStart);
    return code >= 0x80 && code < 0xc0 ? BAD_UTF8_OFFSET : undefined;
  }
  index(byteOffset: number): number {
    return this.utf8 ? Buffer.from(this.bytes.slice(0, byteOffset), 'latin1').toString('utf8').length : byteOffset;
  }
  byteOffset(index: number): number {
    return this.utf8 ? Buffer.byteLength(this.text.slice(0, index), 'utf8') : index;
  }
  out(s: string): string {
    return this.utf8 ? Buffer.from(s, 'utf8').toString('latin1') : s;
  }
  /**
   * The byte offset where the search goes on after a match from `start` to `end` (text indexes).
   * After an empty one, one byte on (resty.core's rule: with `u` that is inside a multibyte
   * character, which the next search refuses); one character on with `U`, which checks nothing.
   */
  next(start: number, end: number): number {
    if (end > start) return this.byteOffset(end);
    if (!this.utf8 || this.check) return this.byteOffset(end) + 1;
    const code = this.text.codePointAt(end);
    return this.byteOffset(end + (code !== undefined && code > 0xffff ? 2 : 1));
  }
}
