/**
 * Reads configuration files into a tree of directives as ngx_conf_parse()
 * does, expanding `include` in place: a relative name is joined to the
 * directory of the main configuration file (without normalising `..`, as
 * nginx prints it), a pattern goes through glob(3), and each file is read
 * once for `-T` however often it is included.
 *
 * nginx applies each directive as soon as it has read it, so of a semantic
 * error above a syntax error it reports the semantic one. The tree keeps that
 * order: a syntax error is stored on the directive list it cut short
 * (`ConfBlock.syntaxError`), and applyBlock() raises it after applying the
 * directives read before it — inside the enclosing block's handler, before
 * that handler's own end-of-block checks, where nginx would have stopped.
 */
import fs from 'node:fs';
import { ConfError, sysErrorText } from './errors.ts';
import { globSync, isGlobPattern } from './glob.ts';
import { Lexer } from './lexer.ts';

export interface ConfNode {
  name: string;
  args: string[];
  /**
   * Whether each argument was written in quotes. nginx itself does not keep
   * this (`"on"` and `on` are the same word); do not give quoting a meaning.
   */
  quoted: boolean[];
  /** The file the directive is in, or `command line` for `-g`. */
  file: string;
  /** The line nginx reports this directive's errors at: where its `;` or `{` was read. */
  line: number;
  /** Block directives: the line of the closing `}` (errors raised after the body was read). */
  endLine?: number;
  /** Present for block directives (`name args { ... }`). */
  children?: ConfBlock;
  /** Set for `*_by_lua_block`: the last argument is the raw Lua source; `line` is the `{`. */
  luaBlock?: boolean;
}

/** A block's directives; `syntaxError` is set when a syntax error ended the reading inside it. */
export type ConfBlock = ConfNode[] & { syntaxError?: ConfError };

export interface ConfFile {
  name: string;
  text: string;
}

export interface ParseResult {
  /** The main context's directives (with `syntaxError` set if reading stopped early). */
  nodes: ConfBlock;
  /** Every file read, once each, in the order first read (what `-T` prints). */
  files: ConfFile[];
  /** The syntax error, also stored on the directive list it cut short. */
  error?: ConfError;
}

export interface ParseOptions {
  /** Directory relative includes are joined to (nginx's conf prefix), with a trailing slash. */
  confPrefix: string;
  /** Read a file; workers pass their snapshot of what the master read instead of the disk. */
  readFile?: (file: string) => string;
}

export const COMMAND_LINE = 'command line';

const LUA_BLOCK = '_by_lua_block';

type ParseType = 'file' | 'block' | 'param';

class Parser {
  readonly files: ConfFile[] = [];
  private readonly dumped = new Set<string>();
  /** Files being read, innermost last: an include of one of them would never end. */
  private readonly reading: string[] = [];
  private readonly opts: ParseOptions;

  constructor(opts: ParseOptions) {
    this.opts = opts;
  }

  /** Reads `file` into `out`; `from` is the `include` directive naming it. */
  parseFile(file: string, out: ConfBlock, from?: ConfNode): void {
    if (this.reading.includes(file)) {
      // nginx recurses until it runs out of descriptors or stack (and may crash)
      throw new ConfError(`recursive include of "${file}"`, from?.file, from?.line);
    }
    const text = this.read(file, from);
    this.reading.push(file);
    try {
      this.parse(new Lexer(text, file), out, 'file');
    } finally {
      this.reading.pop();
    }
  }

  /** Reads `-g` directives into `out`. */
  parseParam(text: string, out: ConfBlock): void {
    this.parse(new Lexer(text, undefined), out, 'param');
  }

  private read(file: string, from?: ConfNode): string {
    let text: string;
    try {
      text = this.opts.readFile ? this.opts.readFile(file) : fs.readFileSync(Buffer.from(file, 'latin1'), 'latin1');
    } catch (err) {
      // nginx opens a directory fine and fails when reading it
      if ((err as NodeJS.ErrnoException).code === 'EISDIR') {
        throw new ConfError(`pread() "${file}" failed ${sysErrorText(err)}`, undefined, undefined, 'crit');
      }
      throw new ConfError(`open() "${file}" failed ${sysErrorText(err)}`, from?.file, from?.line);
    }
    if (!this.dumped.has(file)) {
      this.dumped.add(file);
      this.files.push({ name: file, text });
    }
    return text;
  }

  /** ngx_conf_parse(): statements until the end of the file, parameter or block. */
  private parse(lx: Lexer, out: ConfBlock, type: ParseType): void {
    try {
      const file = lx.file ?? COMMAND_LINE;
      for (;;) {
        const words: string[] = [];
        const quoted: boolean[] = [];
        const end = lx.next(words, quoted);
        if (end === 'eof') {
          if (type === 'block') throw lx.error('unexpected end of file, expecting "}"');
          return;
        }
        if (end === '}') {
          if (type !== 'block') throw lx.error('unexpected "}"');
          return;
        }
        if (end === '{' && type === 'param') throw lx.error('block directives are not supported in -g option');
        const node: ConfNode = { name: words[0], args: words.slice(1), quoted: quoted.slice(1), file, line: lx.line };
        if (node.name === 'include') {
          if (end === '{') throw lx.error('directive "include" is not terminated by ";"');
          this.include(node, out);
        } else if (end === ';') {
          out.push(node);
        } else if (node.name.endsWith(LUA_BLOCK)) {
          node.luaBlock = true;
          node.args.push(lx.readLuaBlock());
          node.quoted.push(false);
          node.endLine = lx.line;
          out.push(node);
        } else {
          const children: ConfBlock = [];
          node.children = children;
          out.push(node);
          this.parse(lx, children, 'block');
          node.endLine = lx.line;
        }
      }
    } catch (err) {
      if (err instanceof ConfError && out.syntaxError === undefined) out.syntaxError = err;
      throw err;
    }
  }

  /** ngx_conf_include(). */
  private include(node: ConfNode, out: ConfBlock): void {
    if (node.args.length !== 1) {
      throw new ConfError('invalid number of arguments in "include" directive', node.file, node.line);
    }
    const name = fullName(this.opts.confPrefix, node.args[0]);
    if (!isGlobPattern(name)) {
      this.parseFile(name, out, node);
      return;
    }
    for (const file of globSync(name)) this.parseFile(file, out, node);
  }
}

/** ngx_get_full_name(): an absolute name as is, else `prefix` + name, not normalised. */
export function fullName(prefix: string, name: string): string {
  return name.startsWith('/') ? name : prefix + name;
}

/**
 * Parses the `-g` directives, then the main configuration file (nginx's
 * order, so the file's copy of a `-g` directive is the duplicate). A syntax
 * error is returned with the directives read before it (see the top).
 */
export function parseConfig(file: string, globals: string | undefined, opts: ParseOptions): ParseResult {
  const parser = new Parser(opts);
  const nodes: ConfBlock = [];
  try {
    if (globals) parser.parseParam(globals, nodes);
    parser.parseFile(file, nodes);
  } catch (err) {
    if (!(err instanceof ConfError)) throw err;
    nodes.syntaxError ??= err;
    return { nodes, files: parser.files, error: err };
  }
  return { nodes, files: parser.files };
}
