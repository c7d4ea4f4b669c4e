/**
 * ngx_http_referer_module: `valid_referers` and `$invalid_referer` ("1"
 * when the Referer header is not valid, else empty).
 *
 * As nginx: a Referer must be at least `http://i.ru` long and start with
 * `http://` or `https://` (else it counts as `blocked`); its host (up to
 * `/` or `:`, at most 256 bytes, lowercased) is looked up in exact names,
 * then `*.example.com`/`.example.com` and `www.example.*` wildcards (the
 * longest wins); a name written with a URI part (`example.com/pics/`) also
 * needs the referer's path to start with it. Then regex server names
 * (`server_names`) against the host, then `~regex` entries (caseless)
 * against everything after the scheme.
 */
import { defineSlot } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import { ConfError } from '../../conf/errors.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { numberArg } from '../../conf/values.ts';
import { setting } from '../../conf/setters.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpMainConf, HttpModule, ServerConf } from '../http-conf.ts';
import { compileRegex } from '../regex.ts';
import type { HttpRequest } from '../request.ts';

/** What a host match asks of the path: nothing, or a prefix. */
type UriPart = string | undefined;

/**
 * Host names with nginx's wildcard hash semantics (ngx_hash_add_key with
 * NGX_HASH_WILDCARD_KEY, ngx_hash_find_combined).
 */
class HostTable {
  readonly exact = new Map<string, UriPart>();
  /** `*.example.com` (star) and `.example.com` (dot), by the suffix `.example.com`. */
  private readonly head = new Map<string, { uri: UriPart; dot: boolean }>();
  /** `www.example.*`, by the prefix `www.example.`. */
  private readonly tail = new Map<string, UriPart>();
  /** Names taken in nginx's exact-key conflict list (`.example.com` takes `example.com`). */
  private readonly taken = new Set<string>();

  get size(): number {
    return this.exact.size + this.head.size + this.tail.size;
  }

  /** Adds a name; returns nginx's reason when it cannot. */
  add(key: string, uri: UriPart): 'invalid' | 'conflict' | undefined {
    const stars = key.split('*').length - 1;
    if (stars > 1 || key.includes('..') || key.includes('\0')) return 'invalid';
    const low = key.toLowerCase();
    if (key.length > 1 && key[0] === '.') {
      const bare = low.slice(1);
      if (this.taken.has(bare) || this.head.has(low)) return 'conflict';
      this.taken.add(bare);
      this.head.set(low, { uri, dot: true });
      return undefined;
    }
    if (key.length > 2 && key.startsWith('*.')) {
      const suffix = low.slice(1);
      if (this.head.has(suffix)) return 'conflict';
      this.head.set(suffix, { uri, dot: false });
      return undefined;
    }
    if (key.length > 2 && key.endsWith('.*')) {
      const prefix = low.slice(0, -1);
      if (this.tail.has(prefix)) return 'conflict';
      this.tail.set(prefix, uri);
      return undefined;
    }
    if (stars) return 'invalid';
    if (this.taken.has(low)) return 'conflict';
    this.taken.add(low);
    this.exact.set(low, uri);
    return undefined;
  }

  /** The entry for `host` (lowercase): exact, else the longest head wildcard, else the longest tail wildcard. */
  find(host: string): { uri: UriPart } | undefined {
    if (this.exact.has(host)) return { uri: this.exact.get(host) };
    if (host === '') return undefined;
    if (this.head.size) {
      const self = this.head.get('.' + host);
      if (self?.dot) return self;
      for (let dot = host.indexOf('.'); dot >= 0; dot = host.indexOf('.', dot + 1)) {
        const w = this.head.get(host.slice(dot));
        if (w) return w;
      }
    }
    if (this.tail.size) {
      // the longest prefix ending with a dot that has something after it
      for (let dot = host.lastIndexOf('.', host.length - 2); dot > 0; dot = host.lastIndexOf('.', dot - 1)) {
        const prefix = host.slice(0, dot + 1);
        if (this.tail.has(prefix)) return { uri: this.tail.get(prefix) };
      }
    }
    return undefined;
  }
}

interface RefererRules {
  none: boolean;
  blocked: boolean;
  serverNames: boolean;
  /** The server the rules were written in (its names join them with `server_names`). */
  server: ServerConf | undefined;
  hosts: HostTable;
  /** Regex server names, matched against the host. */
  serverRegexes: RegExp[];
  /** `~regex` entries, matched against the referer after its scheme. */
  regexes: RegExp[];
}

interface RefererConf {
  rules?: RefererRules;
  hashMaxSize?: number;
  hashBucketSize?: number;
}

const refererSlot = defineSlot<RefererConf>('referer', () => ({}), (parent, child) => {
  child.rules ??= parent.rules;
});

/** Every set of rules of a configuration, completed once its servers are known. */
const rulesOf = new WeakMap<HttpMainConf, RefererRules[]>();

const INVALID = '1';
const VALID = '';

/** ngx_http_referer_variable. */
function invalidReferer(r: HttpRequest): string {
  const rules = r.level.get(refererSlot).rules;
  if (!rules || (rules.hosts.size === 0 && rules.regexes.length === 0 && rules.serverRegexes.length === 0)) return VALID;
  const referer = r.header('referer');
  if (referer === undefined) return rules.none ? VALID : INVALID;
  let ref: string | undefined;
  if (referer.length >= 'http://i.ru'.length) {
    const scheme = referer.slice(0, 8).toLowerCase();
    if (scheme.startsWith('http://')) ref = referer.slice(7);
    else if (scheme === 'https://') ref = referer.slice(8);
  }
  if (ref === undefined) return rules.blocked ? VALID : INVALID;

  let end = 0;
  while (end < ref.length && ref[end] !== '/' && ref[end] !== ':') end++;
  if (end > 256) return INVALID;
  const host = ref.slice(0, end).toLowerCase();
  const found = rules.hosts.find(host);
  if (found) {
    if (found.uri === undefined) return VALID;
    const slash = ref.indexOf('/', end);
    const path = slash < 0 ? '' : ref.slice(slash);
    return path.startsWith(found.uri) ? VALID : INVALID;
  }
  for (const re of rules.serverRegexes) if (re.test(host)) return VALID;
  for (const re of rules.regexes) if (re.test(ref)) return VALID;
  return INVALID;
}

function addHost(cf: ConfContext, rules: RefererRules, key: string, uri: UriPart): void {
  const rc = rules.hosts.add(key, uri);
  if (rc === 'invalid') throw cf.error(`invalid hostname or wildcard "${key}"`);
  // nginx lowercases the key in place before it finds the conflict
  if (rc === 'conflict') throw cf.error(`conflicting parameter "${key.toLowerCase()}"`);
}

function validReferers(cf: ConfContext, node: ConfNode): void {
  const conf = cf.get(refererSlot);
  let rules = Object.hasOwn(conf, 'rules') ? conf.rules : undefined;
  if (!rules) {
    rules = {
      none: false, blocked: false, serverNames: false, server: cf.data.server as ServerConf | undefined,
      hosts: new HostTable(), serverRegexes: [], regexes: [],
    };
    conf.rules = rules;
    const http = httpMainOf(cf);
    const all = rulesOf.get(http) ?? [];
    all.push(rules);
    rulesOf.set(http, all);
  }
  for (const value of node.args) {
    if (value === '') throw cf.error('invalid referer ""');
    if (value === 'none') { rules.none = true; continue; }
    if (value === 'blocked') { rules.blocked = true; continue; }
    if (value === 'server_names') { rules.serverNames = true; continue; }
    if (value[0] === '~') {
      if (value.length === 1) throw cf.error(`empty regex in "${value}"`);
      rules.regexes.push(compileRegex(cf, value.slice(1), true).regex);
      continue;
    }
    const slash = value.indexOf('/');
    if (slash < 0) addHost(cf, rules, value, undefined);
    else addHost(cf, rules, value.slice(0, slash), value.slice(slash));
  }
}

/** Once the servers are read: `server_names` joins each server's names; nginx's check of `none`/`blocked` alone. */
function completeRules(http: HttpMainConf): void {
  for (const rules of rulesOf.get(http) ?? []) {
    if (rules.serverNames && rules.server) {
      for (const sn of rules.server.names) {
        if (sn.regex) rules.serverRegexes.push(sn.regex);
        else rules.hosts.add(sn.name, undefined);
      }
    }
    if ((rules.none || rules.blocked) && rules.hosts.size === 0) {
      throw new ConfError('the "none" or "blocked" referers are specified in the "valid_referers" directive without any valid referer');
    }
  }
  rulesOf.delete(http);
}

export const refererModule: HttpModule = {
  name: 'ngx_http_referer_module',
  directives: [
    { name: 'valid_referers', contexts: Ctx.SERVER | Ctx.LOCATION, args: [1, Infinity], handler: validReferers },
    // nginx sizes its hash tables with these; a JavaScript Map needs no tuning
    { name: 'referer_hash_max_size', contexts: Ctx.SERVER | Ctx.LOCATION, args: 1, handler: setting(refererSlot, 'hashMaxSize', numberArg) },
    { name: 'referer_hash_bucket_size', contexts: Ctx.SERVER | Ctx.LOCATION, args: 1, handler: setting(refererSlot, 'hashBucketSize', numberArg) },
  ],
  variables: [{ name: 'invalid_referer', get: invalidReferer, changeable: true }],
  postconfiguration: completeRules,
};
