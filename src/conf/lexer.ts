/**
 * nginx's configuration tokenizer: ngx_conf_read_token() ported state for
 * state, so every quirk users can hit gives nginx's answer — where a word
 * ends, which characters a quote must be followed by, what `\` escapes, where
 * `#` starts a comment, that `${` does not open a block, and the error line.
 *
 * nginx reads a file through a 4096-byte buffer and refuses a token (or a
 * comment) that fills it ("too long parameter"); `last` below replays that
 * buffer's refills so the same files fail. OpenResty's `*_by_lua_block` bodies
 * are read raw by readLuaBlock(), as lua-nginx-module's own lexer reads them.
 */
import { ConfError } from './errors.ts';

/** What ended a statement: `;`, `{` (a block starts), `}` (the block ends), or the end of the text. */
export type StatementEnd = ';' | '{' | '}' | 'eof';

/** nginx's NGX_CONF_BUFFER: the longest token it can read. */
export const CONF_BUFFER = 4096;

const TAB = 9, LF = 10, CR = 13, SP = 32, DQUOTE = 34, DOLLAR = 36, SQUOTE = 39, RPAREN = 41;
const DASH = 45, SEMI = 59, LBRACKET = 91, BACKSLASH = 92, LBRACE = 123, RBRACE = 125;
const HASH = 35, EQ = 61;

function isSpace(ch: number): boolean {
  return ch === SP || ch === TAB || ch === CR || ch === LF;
}

export class Lexer {
  readonly text: string;
  /** File name for messages; undefined for `-g` text ("in command line"). */
  readonly file: string | undefined;
  /** The current line, as nginx counts it for messages. */
  line: number;
  private pos = 0;
  /** How far nginx's buffer has read into the text. */
  private last: number;

  constructor(text: string, file: string | undefined) {
    this.text = text;
    this.file = file;
    // -g text is one buffer, read at once, and has no lines
    this.line = file === undefined ? 0 : 1;
    this.last = file === undefined ? text.length : 0;
  }

  error(message: string): ConfError {
    return new ConfError(message, this.file ?? 'command line', this.line);
  }

  /**
   * Reads one statement's words into `words` (and whether each was quoted
   * into `quoted`) and returns what ended it. Throws nginx's syntax errors.
   */
  next(words: string[], quoted: boolean[]): StatementEnd {
    const s = this.text;
    const size = s.length;
    let needSpace = false;
    let lastSpace = true;
    let sharpComment = false;
    let variable = false;
    let escaped = false;
    let sQuoted = false;
    let dQuoted = false;
    let start = this.pos;
    let startLine = this.line;

    for (;;) {
      if (this.pos >= this.last) {
        if (this.last >= size) {
          if (words.length > 0 || !lastSpace) {
            throw this.error(this.file === undefined
              ? 'unexpected end of parameter, expecting ";"'
              : 'unexpected end of file, expecting ";" or "}"');
          }
          return 'eof';
        }
        if (this.pos - start === CONF_BUFFER) {
          this.line = startLine;
          if (dQuoted || sQuoted) {
            throw this.error(`too long parameter, probably missing terminating "${dQuoted ? '"' : "'"}" character`);
          }
          throw this.error(`too long parameter "${s.slice(start, start + 10)}..." started`);
        }
        // the buffer is refilled from the start of the current token
        this.last = Math.min(size, start + CONF_BUFFER);
      }

      const ch = s.charCodeAt(this.pos++);

      if (ch === LF) {
        this.line++;
        sharpComment = false;
      }
      if (sharpComment) continue;
      if (escaped) { escaped = false; continue; }

      if (needSpace) {
        if (isSpace(ch)) { lastSpace = true; needSpace = false; continue; }
        if (ch === SEMI) return ';';
        if (ch === LBRACE) return '{';
        if (ch === RPAREN) {
          // `if ($a = "b")`: the `)` starts the next word
          lastSpace = true;
          needSpace = false;
        } else {
          throw this.error(`unexpected "${s[this.pos - 1]}"`);
        }
      }

      if (lastSpace) {
        start = this.pos - 1;
        startLine = this.line;
        if (isSpace(ch)) continue;
        switch (ch) {
          case SEMI:
          case LBRACE:
            if (words.length === 0) throw this.error(`unexpected "${s[this.pos - 1]}"`);
            return ch === LBRACE ? '{' : ';';
          case RBRACE:
            if (words.length !== 0) throw this.error('unexpected "}"');
            return '}';
          case HASH: sharpComment = true; continue;
          case BACKSLASH: escaped = true; lastSpace = false; continue;
          case DQUOTE: start++; dQuoted = true; lastSpace = false; continue;
          case SQUOTE: start++; sQuoted = true; lastSpace = false; continue;
          case DOLLAR: variable = true; lastSpace = false; continue;
          default: lastSpace = false;
        }
        continue;
      }

      // inside a word: `${` does not end it
      if (ch === LBRACE && variable) continue;
      variable = false;
      if (ch === BACKSLASH) { escaped = true; continue; }
      if (ch === DOLLAR) { variable = true; continue; }

      let found = false;
      let wasQuoted = false;
      if (dQuoted) {
        if (ch === DQUOTE) { dQuoted = false; needSpace = true; found = true; wasQuoted = true; }
      } else if (sQuoted) {
        if (ch === SQUOTE) { sQuoted = false; needSpace = true; found = true; wasQuoted = true; }
      } else if (isSpace(ch) || ch === SEMI || ch === LBRACE) {
        lastSpace = true;
        found = true;
      }
      if (!found) continue;

      words.push(unescape(s, start, this.pos - 1));
      quoted.push(wasQuoted);
      if (ch === SEMI) return ';';
      if (ch === LBRACE) return '{';
    }
  }

  /**
   * Reads a `*_by_lua_block` body after its `{` up to the matching `}` and
   * returns it raw. Braces inside Lua strings, long brackets and comments do
   * not count (lua-nginx-module's lexer: `"…"` and `'…'` end at their line,
   * `--[==[ … ]==]` and `[==[ … ]==]` span lines, `--` runs to the line end).
   */
  readLuaBlock(): string {
    const s = this.text;
    const size = s.length;
    const bodyStart = this.pos;
    let level = 1;
    // where lua-nginx-module says an unterminated block started: its last `{`
    let openLine = this.line;
    while (this.pos < size) {
      const ch = s.charCodeAt(this.pos);
      switch (ch) {
        case LF:
          this.line++;
          this.pos++;
          break;
        case LBRACE:
          this.pos++;
          level++;
          openLine = this.line;
          break;
        case RBRACE:
          this.pos++;
          if (--level === 0) return s.slice(bodyStart, this.pos - 1);
          break;
        case LBRACKET:
          if (!this.luaLongBracket(this.pos)) this.pos++;
          break;
        case DASH:
          if (s.charCodeAt(this.pos + 1) !== DASH) { this.pos++; break; }
          if (this.luaLongBracket(this.pos + 2)) break;
          // a line comment: up to (not including) the line end
          while (this.pos < size && s.charCodeAt(this.pos) !== LF) this.pos++;
          break;
        case DQUOTE:
        case SQUOTE:
          this.pos = luaStringEnd(s, this.pos, ch);
          break;
        default:
          this.pos++;
      }
    }
    this.line = openLine;
    throw this.error('unexpected end of file, expecting terminating characters for lua code block');
  }

  /** At `[=*[` starting at `at`: skips to past its closing bracket and returns true. */
  private luaLongBracket(at: number): boolean {
    const s = this.text;
    if (s.charCodeAt(at) !== LBRACKET) return false;
    let i = at + 1;
    while (s.charCodeAt(i) === EQ) i++;
    if (s.charCodeAt(i) !== LBRACKET) return false;
    const level = i - at - 1;
    for (let k = this.pos; k < at; k++) if (s.charCodeAt(k) === LF) this.line++;
    const close = ']' + '='.repeat(level) + ']';
    const end = s.indexOf(close, i + 1);
    if (end < 0) {
      throw this.error(`Lua code block missing the closing long bracket "${close}", the inlined Lua code may be too long`);
    }
    for (let k = at; k < end; k++) if (s.charCodeAt(k) === LF) this.line++;
    this.pos = end + close.length;
    return true;
  }
}

/**
 * Where a Lua string starting at `at` ends (just past its closing quote);
 * a quote whose string does not close on its line is an ordinary character.
 */
function luaStringEnd(s: string, at: number, q: number): number {
  for (let i = at + 1; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    if (ch === q) return i + 1;
    if (ch === LF) break;
    if (ch === BACKSLASH) {
      if (s.charCodeAt(i + 1) === LF || i + 1 >= s.length) break;
      i++;
    }
  }
  return at + 1;
}

/**
 * nginx unescapes `\"`, `\'`, `\\`, `\t`, `\r` and `\n` in every word, quoted
 * or not; any other `\x` stays as written (regexes keep their `\d`).
 */
function unescape(s: string, from: number, to: number): string {
  // look within the word only: indexOf would scan the rest of the file for every word
  let i0 = from;
  while (i0 < to && s.charCodeAt(i0) !== BACKSLASH) i0++;
  if (i0 >= to) return s.slice(from, to);
  let out = s.slice(from, i0);
  for (let i = i0; i < to; i++) {
    const ch = s.charCodeAt(i);
    if (ch === BACKSLASH) {
      const n = s.charCodeAt(i + 1);
      if (n === DQUOTE || n === SQUOTE || n === BACKSLASH) { out += s[i + 1]; i++; continue; }
      if (n === 116) { out += '\t'; i++; continue; }
      if (n === 114) { out += '\r'; i++; continue; }
      if (n === 110) { out += '\n'; i++; continue; }
    }
    out += s[i];
  }
  return out;
}
