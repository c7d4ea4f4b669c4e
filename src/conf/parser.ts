/**
 * Reads configuration files into a tree of directives, expanding `include`
 * in place (nginx resolves relative includes against the directory of the
 * main configuration file and sorts glob matches).
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConfError, sysErrorText } from './errors.ts';
import { Lexer } from './lexer.ts';

export interface ConfNode {
  name: string;
  args: string[];
  /** Whether each argument was written in quotes (`if`, `map` and `set` care). */
  quoted: boolean[];
  file: string;
  line: number;
  /** Present for block directives (`name args { ... }`). */
  children?: ConfNode[];
  /** Set for `*_by_lua_block`: args[0] is the raw Lua source. */
  luaBlock?: boolean;
}

export interface ConfFile {
  name: string;
  text: string;
}

export interface ParseResult {
  nodes: ConfNode[];
  /** Every file read, once each, in the order read (what `-T` prints). */
  files: ConfFile[];
  /** A syntax error found after `nodes` were read (nodes hold what came before it). */
  error?: ConfError;
}

export interface ParseOptions {
  /** Directory relative includes are resolved against (nginx's conf prefix). */
  confPrefix: string;
  /** Read a file; tests and workers pass a snapshot instead of the disk. */
  readFile?: (file: string) => string;
}

export const COMMAND_LINE = 'command line';

class Parser {
  readonly files: ConfFile[] = [];
  private readonly seen = new Set<string>();
  private readonly opts: ParseOptions;

  constructor(opts: ParseOptions) {
    this.opts = opts;
  }

  readFile(file: string, from?: { file: string; line: number }): string {
    let text: string;
    try {
      text = this.opts.readFile ? this.opts.readFile(file) : fs.readFileSync(file, 'latin1');
    } catch (err) {
      throw new ConfError(`open() "${file}" failed ${sysErrorText(err)}`, from?.file, from?.line);
    }
    if (!this.seen.has(file)) {
      this.seen.add(file);
      this.files.push({ name: file, text });
    }
    return text;
  }

  /** Parses one file's (or the command line's) directives into `out`. */
  parseText(text: string, file: string, out: ConfNode[]): void {
    const lexer = new Lexer(text, file);
    this.parseBlock(lexer, out, false);
  }

  private parseBlock(lx: Lexer, out: ConfNode[], inBlock: boolean): void {
    for (;;) {
      let tok = lx.next();
      if (tok.kind === 'eof') {
        if (inBlock) throw new ConfError('unexpected end of file, expecting "}"', lx.file, lx.line);
        return;
      }
      if (tok.kind === '}') {
        if (!inBlock) throw new ConfError('unexpected "}"', lx.file, tok.line);
        return;
      }
      if (tok.kind === ';' || tok.kind === '{') throw new ConfError(`unexpected "${tok.kind}"`, lx.file, tok.line);
      const node: ConfNode = { name: tok.value, args: [], quoted: [], file: lx.file, line: tok.line };
      // a quoted directive name is still a name
      for (;;) {
        tok = lx.next();
        if (tok.kind === 'word') {
          node.args.push(tok.value);
          node.quoted.push(tok.quoted);
          continue;
        }
        if (tok.kind === ';') break;
        if (tok.kind === '{') {
          if (node.name.endsWith('_by_lua_block')) {
            node.luaBlock = true;
            node.args.push(lx.rawLuaBlock());
            node.quoted.push(true);
          } else {
            node.children = [];
            out.push(node);
            this.parseBlock(lx, node.children, true);
          }
          break;
        }
        if (tok.kind === '}') throw new ConfError('unexpected "}"', lx.file, tok.line);
        throw new ConfError('unexpected end of file, expecting ";" or "}"', lx.file, lx.line);
      }
      if (node.children) continue;
      if (node.name === 'include' && !node.luaBlock) {
        this.include(node, out);
        continue;
      }
      out.push(node);
    }
  }

  private include(node: ConfNode, out: ConfNode[]): void {
    if (node.args.length !== 1) {
      throw new ConfError('invalid number of arguments in "include" directive', node.file, node.line);
    }
    const name = path.resolve(this.opts.confPrefix, node.args[0]);
    let files: string[];
    if (/[*?[]/.test(name)) {
      try {
        files = fs.globSync(name).filter((f) => !path.basename(f).startsWith('.')).sort();
      } catch (err) {
        throw new ConfError(`glob() "${name}" failed ${sysErrorText(err)}`, node.file, node.line);
      }
    } else {
      files = [name];
    }
    for (const f of files) {
      const text = this.readFile(f, node);
      this.parseText(text, f, out);
    }
  }
}

/**
 * Parses the main configuration file and the `-g` directives. A syntax error
 * is returned with the nodes read before it, so that an earlier semantic
 * error (an unknown directive above it) can be reported first, as nginx does.
 */
export function parseConfig(file: string, globals: string | undefined, opts: ParseOptions): ParseResult {
  const parser = new Parser(opts);
  const nodes: ConfNode[] = [];
  try {
    // nginx applies -g directives before the file, so the file's copy is the duplicate
    if (globals) parser.parseText(globals, COMMAND_LINE, nodes);
    const text = parser.readFile(file);
    parser.parseText(text, file, nodes);
  } catch (err) {
    if (!(err instanceof ConfError)) throw err;
    return { nodes, files: parser.files, error: err };
  }
  return { nodes, files: parser.files };
}
