/**
 * The SSI tokenizer (nginx's ngx_http_ssi_parse): finds `<!--# command
 * param="value" ... -->` in a body that arrives in pieces. Text around
 * commands is reported as [copyStart, copyEnd) ranges of the current
 * buffer; a `<!--` cut by a buffer boundary is remembered as `looked`
 * characters of "<!--" so they can be sent as text if no command follows.
 * The state machine and its limits and error messages are nginx's.
 */

export const PARSE_AGAIN = 0;
export const PARSE_COMMAND = 1;
export const PARSE_ERROR = 2;

/** nginx's NGX_HTTP_SSI_COMMAND_LEN and NGX_HTTP_SSI_PARAM_LEN. */
const COMMAND_LEN = 32;
const PARAM_LEN = 32;

const START = 0;
const TAG = 1;
const COMMENT0 = 2;
const COMMENT1 = 3;
const SHARP = 4;
const PRECOMMAND = 5;
const COMMAND = 6;
const PREPARAM = 7;
const PARAM = 8;
const PREEQUAL = 9;
const PREVALUE = 10;
const DOUBLE_QUOTED = 11;
const QUOTED = 12;
const QUOTED_SYMBOL = 13;
const POSTPARAM = 14;
const COMMENT_END0 = 15;
const COMMENT_END1 = 16;
const ERROR = 17;
const ERROR_END0 = 18;
const ERROR_END1 = 19;

const LT = 0x3c;

export interface SsiParam {
  key: string;
  value: string;
}

function isSpace(ch: number): boolean {
  return ch === 0x20 || ch === 0x0d || ch === 0x0a || ch === 0x09;
}

export class SsiParser {
  /** Where parsing stands in the current buffer. */
  pos = 0;
  /** Text of the current buffer to send: [copyStart, copyEnd); -1 for none (nginx's NULL). */
  copyStart = -1;
  copyEnd = -1;
  /** Characters of "<!--" matched at the end of what was parsed. */
  looked = 0;
  /** Characters of "<!--" left over from the previous buffer, sent as text unless a command follows. */
  saved = 0;
  /** The command parsed (valid after PARSE_COMMAND). */
  command = '';
  params: SsiParam[] = [];
  state = START;
  private savedState = DOUBLE_QUOTED;
  private param: SsiParam | undefined;
  private readonly valueLen: number;
  private readonly onError: (msg: string) => void;

  constructor(valueLen: number, onError: (msg: string) => void) {
    this.valueLen = valueLen;
    this.onError = onError;
  }

  get inText(): boolean {
    return this.state === START;
  }

  /** Parses `buf` from `pos`: PARSE_AGAIN when the buffer is used up, else a command or an error ended. */
  parse(buf: Buffer): number {
    let state = this.state;
    let looked = this.looked;
    let copyEnd = this.copyEnd;
    const last = buf.length;
    const start = this.pos;
    let p = start;

    for (; p < last; p++) {
      const ch = buf[p];

      if (state === START) {
        // the tight loop: text up to the next '<'
        const lt = buf.indexOf(LT, p);
        if (lt < 0) {
          this.state = state;
          this.pos = last;
          this.looked = looked;
          this.copyEnd = last;
          if (this.copyStart < 0) this.copyStart = start;
          return PARSE_AGAIN;
        }
        p = lt;
        copyEnd = p;
        looked = 1;
        state = TAG;
        continue;
      }

      switch (state) {
        case TAG:
          if (ch === 0x21 /* ! */) { looked = 2; state = COMMENT0; }
          else if (ch === LT) copyEnd = p;
          else { copyEnd = p; looked = 0; state = START; }
          break;

        case COMMENT0:
        case COMMENT1:
          if (ch === 0x2d /* - */) { looked = state === COMMENT0 ? 3 : 4; state = state === COMMENT0 ? COMMENT1 : SHARP; }
          else if (ch === LT) { copyEnd = p; looked = 1; state = TAG; }
          else { copyEnd = p; looked = 0; state = START; }
          break;

        case SHARP:
          if (ch === 0x23 /* # */) {
            // the "<!--" began in this buffer: what was saved from the previous one is part of it
            if (p - start < 4) this.saved = 0;
            looked = 0;
            state = PRECOMMAND;
          } else if (ch === LT) { copyEnd = p; looked = 1; state = TAG; }
          else { copyEnd = p; looked = 0; state = START; }
          break;

        case PRECOMMAND:
          if (isSpace(ch)) break;
          this.command = String.fromCharCode(ch);
          this.params = [];
          state = COMMAND;
          break;

        case COMMAND:
          if (isSpace(ch)) state = PREPARAM;
          else if (ch === 0x2d) state = COMMENT_END0;
          else if (this.command.length === COMMAND_LEN) {
            this.onError(`the "${this.command}${String.fromCharCode(ch)}..." SSI command is too long`);
            state = ERROR;
          } else this.command += String.fromCharCode(ch);
          break;

        case PREPARAM:
          if (isSpace(ch)) break;
          if (ch === 0x2d) { state = COMMENT_END0; break; }
          this.param = { key: String.fromCharCode(ch), value: '' };
          this.params.push(this.param);
          state = PARAM;
          break;

        case PARAM: {
          const param = this.param!;
          if (isSpace(ch)) state = PREEQUAL;
          else if (ch === 0x3d /* = */) state = PREVALUE;
          else if (ch === 0x2d) {
            state = ERROR_END0;
            this.onError(`unexpected "-" symbol after "${param.key}" parameter in "${this.command}" SSI command`);
          } else if (param.key.length === PARAM_LEN) {
            state = ERROR;
            this.onError(`too long "${param.key}${String.fromCharCode(ch)}..." parameter in "${this.command}" SSI command`);
          } else param.key += String.fromCharCode(ch);
          break;
        }

        case PREEQUAL:
          if (isSpace(ch)) break;
          if (ch === 0x3d) { state = PREVALUE; break; }
          state = ch === 0x2d ? ERROR_END0 : ERROR;
          this.onError(`unexpected "${String.fromCharCode(ch)}" symbol after "${this.param!.key}" parameter in "${this.command}" SSI command`);
          break;

        case PREVALUE:
          if (isSpace(ch)) break;
          if (ch === 0x22 /* " */) { state = DOUBLE_QUOTED; break; }
          if (ch === 0x27 /* ' */) { state = QUOTED; break; }
          state = ch === 0x2d ? ERROR_END0 : ERROR;
          this.onError(`unexpected "${String.fromCharCode(ch)}" symbol before value of "${this.param!.key}" parameter in "${this.command}" SSI command`);
          break;

        case DOUBLE_QUOTED:
        case QUOTED:
          if (ch === (state === DOUBLE_QUOTED ? 0x22 : 0x27)) { state = POSTPARAM; break; }
          if (ch === 0x5c /* \ */) {
            // the backslash stays in the value; the next character is taken as is
            this.savedState = state;
            state = QUOTED_SYMBOL;
          }
          state = this.addToValue(ch, state);
          break;

        case QUOTED_SYMBOL:
          state = this.addToValue(ch, this.savedState);
          break;

        case POSTPARAM:
          if (isSpace(ch)) state = PREPARAM;
          else if (ch === 0x2d) state = COMMENT_END0;
          else {
            const param = this.param!;
            this.onError(`unexpected "${String.fromCharCode(ch)}" symbol after "${param.value}" value of "${param.key}" parameter in "${this.command}" SSI command`);
            state = ERROR;
          }
          break;

        case COMMENT_END0:
        case COMMENT_END1:
          if (state === COMMENT_END0 && ch === 0x2d) { state = COMMENT_END1; break; }
          if (state === COMMENT_END1 && ch === 0x3e /* > */) {
            this.finish(p, looked, copyEnd, start);
            return PARSE_COMMAND;
          }
          this.onError(`unexpected "${String.fromCharCode(ch)}" symbol in "${this.command}" SSI command`);
          state = ERROR;
          break;

        case ERROR:
          if (ch === 0x2d) state = ERROR_END0;
          break;

        case ERROR_END0:
          state = ch === 0x2d ? ERROR_END1 : ERROR;
          break;

        case ERROR_END1:
          if (ch === 0x3e) {
            this.finish(p, looked, copyEnd, start);
            return PARSE_ERROR;
          }
          state = ERROR;
          break;
      }
    }

    this.state = state;
    this.pos = p;
    this.looked = looked;
    this.copyEnd = state === START ? p : copyEnd;
    if (this.copyStart < 0 && this.copyEnd >= 0) this.copyStart = start;
    return PARSE_AGAIN;
  }

  /** A command (or an error) ended at `p` ('>'). */
  private finish(p: number, looked: number, copyEnd: number, start: number): void {
    this.state = START;
    this.pos = p + 1;
    this.looked = looked;
    this.copyEnd = copyEnd;
    if (this.copyStart < 0 && copyEnd >= 0) this.copyStart = start;
  }

  /** One more character of a quoted value, or nginx's "too long" error. */
  private addToValue(ch: number, state: number): number {
    const param = this.param!;
    if (param.value.length === this.valueLen) {
      this.onError(`too long "${param.value}${String.fromCharCode(ch)}..." value of "${param.key}" parameter in "${this.command}" SSI command`);
      return ERROR;
    }
    param.value += String.fromCharCode(ch);
    return state;
  }
}
