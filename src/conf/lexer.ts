/**
 * nginx's configuration tokenizer (ngx_conf_read_token), token for token:
 * words separated by white space, `"`/`'` quoting, `\` escapes, `#` comments,
 * `${var}` inside words, and `;`, `{`, `}` as structure. OpenResty's
 * `*_by_lua_block { ... }` bodies are read raw, as Lua source.
 */
import { ConfError } from './errors.ts';

export type TokenKind = 'word' | ';' | '{' | '}' | 'eof';

export interface Token {
  kind: TokenKind;
  value: string;
  quoted: boolean;
  line: number;
}

export class Lexer {
  private pos = 0;
  line = 1;
  readonly text: string;
  readonly file: string;

  constructor(text: string, file: string) {
    this.text = text;
    this.file = file;
  }

  private fail(msg: string): never {
    throw new ConfError(msg, this.file, this.line);
  }

  /** Next structural token or word. */
  next(): Token {
    const s = this.text;
    // skip white space and comments
    for (;;) {
      if (this.pos >= s.length) return { kind: 'eof', value: '', quoted: false, line: this.line };
      const ch = s[this.pos];
      if (ch === '\n') { this.line++; this.pos++; continue; }
      if (ch === ' ' || ch === '\t' || ch === '\r') { this.pos++; continue; }
      if (ch === '#') {
        while (this.pos < s.length && s[this.pos] !== '\n') this.pos++;
        continue;
      }
      break;
    }
    const line = this.line;
    const ch = s[this.pos];
    if (ch === ';' || ch === '{' || ch === '}') {
      this.pos++;
      return { kind: ch, value: ch, quoted: false, line };
    }
    if (ch === '"' || ch === "'") return this.quoted(ch, line);
    return this.bare(line);
  }

  private quoted(q: string, line: number): Token {
    const s = this.text;
    const start = ++this.pos;
    for (;;) {
      if (this.pos >= s.length) this.fail('unexpected end of file, expecting ";" or "}"');
      const ch = s[this.pos];
      if (ch === '\n') this.line++;
      if (ch === '\\') { this.pos += 2; if (s[this.pos - 1] === '\n') this.line++; continue; }
      if (ch === q) break;
      this.pos++;
    }
    const raw = s.slice(start, this.pos);
    this.pos++;
    // after a closing quote nginx requires a separator
    const after = s[this.pos];
    if (after !== undefined && !' \t\r\n;{)'.includes(after)) this.fail(`unexpected "${after}"`);
    if (after === ')') this.pos++;
    return { kind: 'word', value: unescape(raw), quoted: true, line };
  }

  private bare(line: number): Token {
    const s = this.text;
    const start = this.pos;
    let variable = false;
    for (;;) {
      if (this.pos >= s.length) break;
      const ch = s[this.pos];
      if (ch === '{' && variable) { this.pos++; variable = false; continue; }
      variable = false;
      if (ch === '\\') {
        if (s[this.pos + 1] === '\n') this.line++;
        this.pos += 2;
        continue;
      }
      if (ch === '$') { variable = true; this.pos++; continue; }
      if (ch === ' ' || ch === '\t' || ch === '\r' || ch === '\n' || ch === ';' || ch === '{') break;
      this.pos++;
    }
    return { kind: 'word', value: unescape(s.slice(start, this.pos)), quoted: false, line };
  }

  /**
   * Reads a raw Lua block body after its opening `{`, up to the matching `}`,
   * skipping Lua strings, long brackets and comments (as lua-nginx-module does).
   */
  rawLuaBlock(): string {
    const s = this.text;
    const start = this.pos;
    let depth = 1;
    while (this.pos < s.length) {
      const ch = s[this.pos];
      if (ch === '\n') { this.line++; this.pos++; continue; }
      if (ch === '-' && s[this.pos + 1] === '-') {
        this.pos += 2;
        const level = longBracketLevel(s, this.pos);
        if (level >= 0) { this.skipLongBracket(level); continue; }
        while (this.pos < s.length && s[this.pos] !== '\n') this.pos++;
        continue;
      }
      if (ch === '[') {
        const level = longBracketLevel(s, this.pos);
        if (level >= 0) { this.skipLongBracket(level); continue; }
      }
      if (ch === '"' || ch === "'") {
        this.pos++;
        while (this.pos < s.length && s[this.pos] !== ch) {
          if (s[this.pos] === '\\') this.pos++;
          if (s[this.pos] === '\n') this.line++;
          this.pos++;
        }
        this.pos++;
        continue;
      }
      if (ch === '{') depth++;
      if (ch === '}' && --depth === 0) {
        const body = s.slice(start, this.pos);
        this.pos++;
        return body;
      }
      this.pos++;
    }
    this.fail('unexpected end of file, expecting "}"');
  }

  private skipLongBracket(level: number): void {
    const s = this.text;
    const close = ']' + '='.repeat(level) + ']';
    this.pos += level + 2;
    const end = s.indexOf(close, this.pos);
    const stop = end < 0 ? s.length : end + close.length;
    for (let i = this.pos; i < stop; i++) if (s[i] === '\n') this.line++;
    this.pos = stop;
  }
}

/** `[[`, `[=[`, ... at pos: returns the number of `=`, or -1. */
function longBracketLevel(s: string, pos: number): number {
  if (s[pos] !== '[') return -1;
  let i = pos + 1;
  while (s[i] === '=') i++;
  return s[i] === '[' ? i - pos - 1 : -1;
}

/** nginx unescapes `\"`, `\'`, `\\`, `\t`, `\r`, `\n` in every token; other `\x` stay as written. */
function unescape(raw: string): string {
  if (!raw.includes('\\')) return raw;
  let out = '';
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i];
    if (ch === '\\' && i + 1 < raw.length) {
      const n = raw[i + 1];
      if (n === '"' || n === "'" || n === '\\') { out += n; i++; continue; }
      if (n === 't') { out += '\t'; i++; continue; }
      if (n === 'r') { out += '\r'; i++; continue; }
      if (n === 'n') { out += '\n'; i++; continue; }
    }
    out += ch;
  }
  return out;
}
