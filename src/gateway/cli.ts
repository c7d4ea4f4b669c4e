/**
 * `gatehouse gateway [-p prefix] [-c conf/config.yaml] [-t|-T] [-q] [-s signal]`:
 * reads APISIX's config.yaml, writes the nginx configuration the gateway
 * runs on (`<prefix>/conf/gateway-nginx.conf`, as APISIX writes its
 * conf/nginx.conf) and hands the engine the nginx command line for it.
 * Configuration errors name the YAML key; an empty admin key is replaced
 * by a random one, written back and printed once.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fullName } from '../conf/parser.ts';
import { ConfigError, loadGatewayConfig } from './config/config-yaml.ts';
import type { GatewayConfig } from './config/config-yaml.ts';
import { buildNginxConf } from './config/nginx-conf.ts';

export const GATEWAY_NGINX_CONF = 'conf/gateway-nginx.conf';
export const GATEWAY_STORE = 'data/gateway.sqlite';

interface GatewayOptions { prefix?: string; conf?: string; test: boolean; dump: boolean; quiet: boolean; signal?: string }

function parse(argv: string[]): GatewayOptions | string {
  const o: GatewayOptions = { test: false, dump: false, quiet: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = (): string | undefined => (a.length > 2 ? a.slice(2) : argv[++i]);
    switch (a.slice(0, 2)) {
      case '-p': o.prefix = value(); if (o.prefix === undefined) return 'option "-p" requires directory name'; break;
      case '-c': o.conf = value(); if (o.conf === undefined) return 'option "-c" requires file name'; break;
      case '-s': o.signal = value(); if (o.signal === undefined) return 'option "-s" requires parameter'; break;
      case '-t': o.test = true; if (a.includes('q')) o.quiet = true; break;
      case '-T': o.test = true; o.dump = true; break;
      case '-q': o.quiet = true; break;
      default: return `invalid option: "${a}"`;
    }
  }
  return o;
}

function say(line: string): void {
  fs.writeSync(2, `gatehouse: ${line}\n`);
}

/**
 * Prepares the gateway's nginx configuration; returns the nginx command
 * line to run it with, or an exit code.
 */
export function prepareGateway(argv: string[], root: string): string[] | number {
  const o = parse(argv);
  if (typeof o === 'string') { say(o); return 1; }
  const prefix = o.prefix === undefined ? root + '/' : o.prefix.endsWith('/') ? o.prefix : o.prefix + '/';
  const yamlFile = path.resolve(fullName(prefix, o.conf ?? 'conf/config.yaml'));
  let cfg;
  try {
    cfg = loadGatewayConfig(yamlFile, !o.test && o.signal === undefined);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    say(`[emerg] ${e.message}`);
    if (o.test) say(`configuration file ${yamlFile} test failed`);
    return 1;
  }
  const unreadable = unreadableEtcdFile(cfg, path.resolve(prefix));
  if (unreadable) {
    say(`[emerg] ${yamlFile}: ${unreadable}`);
    if (o.test) say(`configuration file ${yamlFile} test failed`);
    return 1;
  }
  const wrote = !o.test && o.signal === undefined;
  if (wrote) for (const k of cfg.generated) {
    say(`[notice] generated the Admin API key of "${k.name ?? k.role}" and wrote it to ${yamlFile}: ${k.key}`);
  }
  if (o.test && !o.quiet) say(`the configuration file ${yamlFile} syntax is ok`);
  const absPrefix = path.resolve(prefix);
  const nginxConf = path.join(absPrefix, GATEWAY_NGINX_CONF);
  const text = buildNginxConf(cfg, path.join(absPrefix, GATEWAY_STORE));
  fs.mkdirSync(path.dirname(nginxConf), { recursive: true });
  fs.mkdirSync(path.join(absPrefix, 'logs'), { recursive: true });
  if (!fs.existsSync(nginxConf) || fs.readFileSync(nginxConf, 'utf8') !== text) fs.writeFileSync(nginxConf, text);
  const out = ['-p', prefix, '-c', nginxConf];
  if (o.dump) out.push('-T');
  else if (o.test) out.push('-t');
  if (o.quiet) out.push('-q');
  if (o.signal !== undefined) out.push('-s', o.signal);
  return out;
}

/** The etcd certificate files must be readable (relative to the prefix, as the workers open them). */
function unreadableEtcdFile(cfg: GatewayConfig, prefix: string): string | undefined {
  const e = cfg.etcd;
  if (!e) return undefined;
  const files: Array<[string, string | undefined]> = [
    ['deployment.etcd.tls.cert', e.tls.cert], ['deployment.etcd.tls.key', e.tls.key], ['apisix.ssl.ssl_trusted_certificate', e.trustedCa],
  ];
  for (const [key, file] of files) {
    if (file === undefined) continue;
    try {
      fs.accessSync(path.resolve(prefix, file), fs.constants.R_OK);
    } catch (err) {
      return `${key}: cannot read "${file}": ${(err as Error).message}`;
    }
  }
  return undefined;
}
