/**
 * ngx_http_access_module: `allow` and `deny` with addresses, CIDR blocks,
 * `unix:` and `all`, checked in order; the first match decides. A level
 * with its own rules inherits none. Works with `satisfy` (core, see the
 * access phase in phases.ts).
 */
import net from 'node:net';
import { defineSlot } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { mainErrorLog } from '../../core/error-log.ts';
import { DECLINED, OK } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { coreLoc } from './core/settings.ts';

export interface Rule {
  deny: boolean;
  /** Which clients the rule applies to. */
  family: 4 | 6 | 'unix' | 'all';
  /** Network address and mask as 4 (IPv4) or 16 (IPv6) bytes. */
  addr?: Uint8Array;
  mask?: Uint8Array;
}

interface AccessConf {
  rules?: Rule[];
}

const accessSlot = defineSlot<AccessConf>('access', () => ({}), (parent, child) => {
  child.rules ??= parent.rules;
});

/** The bytes of an IPv4 or IPv6 address. */
export function addressBytes(ip: string): Uint8Array | undefined {
  if (net.isIPv4(ip)) return Uint8Array.from(ip.split('.').map(Number));
  if (!net.isIPv6(ip)) return undefined;
  let text = ip;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  let tail: number[] = [];
  if (v4) {
    tail = v4[1].split('.').map(Number);
    text = text.slice(0, -v4[1].length) + '0:0';
  }
  const [head, rest] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = rest !== undefined && rest !== '' ? rest.split(':') : [];
  const groups = rest === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  const out = new Uint8Array(16);
  groups.forEach((g, i) => { const n = parseInt(g, 16); out[i * 2] = n >> 8; out[i * 2 + 1] = n & 0xff; });
  if (v4) out.set(tail, 12);
  return out;
}

function maskBytes(bits: number, len: number): Uint8Array {
  const m = new Uint8Array(len);
  for (let i = 0; i < len; i++) {
    const b = Math.max(0, Math.min(8, bits - i * 8));
    m[i] = b === 0 ? 0 : (0xff << (8 - b)) & 0xff;
  }
  return m;
}

/** Parses `addr[/bits]` (ngx_ptocidr); warns about host bits as nginx does. */
export function parseRule(cf: ConfContext, node: ConfNode, deny: boolean): Rule {
  const value = node.args[0];
  if (value === 'all') return { deny, family: 'all' };
  if (value === 'unix:') return { deny, family: 'unix' };
  const slash = value.indexOf('/');
  const ip = slash >= 0 ? value.slice(0, slash) : value;
  const addr = addressBytes(ip);
  const bitsText = slash >= 0 ? value.slice(slash + 1) : undefined;
  const maxBits = addr ? addr.length * 8 : 0;
  const bits = bitsText === undefined ? maxBits : /^\d+$/.test(bitsText) ? Number(bitsText) : NaN;
  if (!addr || !(bits >= 0 && bits <= maxBits)) throw cf.error(`invalid parameter "${value}"`);
  const mask = maskBytes(bits, addr.length);
  let hostBits = false;
  for (let i = 0; i < addr.length; i++) {
    if (addr[i] & ~mask[i]) hostBits = true;
    addr[i] &= mask[i];
  }
  if (hostBits) mainErrorLog().warn(`low address bits of ${value} are meaningless in ${node.file}:${node.line}`);
  return { deny, family: addr.length === 4 ? 4 : 6, addr, mask };
}

export function matches(rule: Rule, family: 4 | 6 | 'unix', addr: Uint8Array | undefined): boolean {
  if (rule.family === 'all') return true;
  if (rule.family !== family) return false;
  if (family === 'unix') return true;
  const a = addr!;
  const net = rule.addr!;
  const mask = rule.mask!;
  for (let i = 0; i < net.length; i++) if ((a[i] & mask[i]) !== net[i]) return false;
  return true;
}

function accessHandler(r: HttpRequest): number {
  const rules = r.level.get(accessSlot).rules;
  if (!rules) return DECLINED;
  const remote = r.remoteAddress;
  let family: 4 | 6 | 'unix';
  let addr: Uint8Array | undefined;
  if (remote.startsWith('unix:')) family = 'unix';
  else {
    addr = addressBytes(remote);
    family = addr?.length === 4 ? 4 : 6;
  }
  for (const rule of rules) {
    if (!matches(rule, family, addr)) continue;
    if (!rule.deny) return OK;
    if ((r.level.get(coreLoc).satisfy ?? 'all') === 'all') requestLog(r).error('access forbidden by rule');
    return 403;
  }
  return DECLINED;
}

function ruleDirective(deny: boolean) {
  return (cf: ConfContext, node: ConfNode): undefined => {
    const c = cf.get(accessSlot);
    if (!Object.hasOwn(c, 'rules') || c.rules === undefined) c.rules = [];
    c.rules.push(parseRule(cf, node, deny));
    return undefined;
  };
}

export const accessModule: HttpModule = {
  name: 'ngx_http_access_module',
  directives: [
    { name: 'allow', contexts: HTTP_ANY | Ctx.LMT, args: 1, handler: ruleDirective(false) },
    { name: 'deny', contexts: HTTP_ANY | Ctx.LMT, args: 1, handler: ruleDirective(true) },
  ],
  postconfiguration(http) {
    // nginx's access phase: access (allow/deny) before auth_basic
    http.addPhaseHandler('ACCESS', 100, accessHandler);
  },
};
