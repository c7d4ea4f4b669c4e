/**
 * What the SSI filter keeps per request (nginx's ngx_http_ssi_ctx_t) and per
 * client request (the main request's context: variables set by `set`,
 * `include ... set=` and named regex captures, `block`s, the last regex
 * captures), the module's configuration, and what commands see of the filter.
 */
import type { Writable } from 'node:stream';
import { defineSlot, inheritUnset } from '../../../conf/context.ts';
import type { MergedConf } from '../../../conf/context.ts';
import type { HttpRequest } from '../../request.ts';
import type { RequestLogger } from '../../request-log.ts';
import type { Subrequest } from '../../subrequest.ts';

export interface SsiConf {
  enable?: boolean;
  silentErrors?: boolean;
  ignoreRecycledBuffers?: boolean;
  lastModified?: boolean;
  minFileChunk?: number;
  valueLen?: number;
  /** Lowercased MIME types; `*` matches any. text/html is always in. */
  types?: Set<string>;
}

const SSI_DEFAULTS = {
  enable: false, silentErrors: false, ignoreRecycledBuffers: false, lastModified: false,
  minFileChunk: 1024, valueLen: 255, types: new Set(['text/html']),
} satisfies SsiConf;

export const ssiSlot = defineSlot<SsiConf, typeof SSI_DEFAULTS>('ssi', () => ({}), inheritUnset, SSI_DEFAULTS);

/** `echo` encodings. */
export const ENC_NONE = 0;
export const ENC_URL = 1;
export const ENC_ENTITY = 2;

/** nginx's NGX_HTTP_SSI_COND_IF / _ELSE: where in an if/elif/else/endif the parser is. */
export const COND_IF = 1;
export const COND_ELSE = 2;

export const DEFAULT_TIMEFMT = '%A, %d-%b-%Y %H:%M:%S %Z';
export const DEFAULT_ERRMSG = '[an error occurred while processing the directive]';

/** The state of one request's SSI processing. */
export class SsiContext {
  /** Text and commands take effect (off in a false branch and inside a block). */
  output = true;
  /** A branch of the current if/elif/else was taken. */
  outputChosen = false;
  conditional = 0;
  /** Text and commands go into the last block defined. */
  block = false;
  encoding = ENC_ENTITY;
  timefmt = DEFAULT_TIMEFMT;
  errmsg = DEFAULT_ERRMSG;
  readonly conf: MergedConf<typeof ssiSlot>;

  constructor(conf: MergedConf<typeof ssiSlot>) {
    this.conf = conf;
  }
}

export interface SsiBlock {
  name: string;
  bufs: Buffer[];
}

/** State shared by a client's request and every subrequest under it. */
export class SsiMainState {
  readonly variables = new Map<string, string>();
  readonly blocks: SsiBlock[] = [];
  /** Captures of the last regex `if` that matched ($0..$9); PCRE counts up to the last group that matched. */
  captures: string[] = [];
}

/** Keys of the request contexts (r.ctx). */
export const SSI_CTX = {};
export const SSI_MAIN = {};

/** What a command returns: done, or nginx's error text goes out. */
export const SSI_OK = 0;
export const SSI_ERROR = 1;

/** What a command sees of the filter running it. */
export interface SsiRun {
  readonly r: HttpRequest;
  readonly ctx: SsiContext;
  readonly mctx: SsiMainState;
  readonly log: RequestLogger;
  /** Output text at the current place. */
  send(buf: Buffer): void;
  /** A place for a subrequest's body after what was emitted so far. */
  place(): Writable;
  /** Starts `sub` once the current buffer is parsed (nginx posts subrequests). */
  post(sub: Subrequest): void;
  /** Waits until `sub` is over; false when the client's request is gone. */
  wait(sub: Subrequest): Promise<boolean>;
}

/** A command's parameters by name. */
export type SsiParams = Map<string, string>;
