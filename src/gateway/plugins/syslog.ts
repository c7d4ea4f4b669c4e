/**
 * syslog (apisix/plugins/syslog.lua, syslog/init.lua): each request's entry,
 * as JSON, becomes an RFC 5424 line (apisix/utils/rfc5424.lua: facility
 * SYSLOG, severity INFO, the request's $host, app "apisix", the worker's
 * pid); a batch's lines, concatenated, go to the conf's socket logger
 * (lua-resty-logger-socket), which buffers them until `flush_limit` bytes
 * are in, drops a message that would pass `drop_limit`, and writes the
 * buffer over TCP (TLS with `tls`, unverified) or as one UDP datagram.
 * `timeout` is in milliseconds. The TCP connection is kept for the next
 * flush (`pool_size` is not counted: one connection a conf per worker).
 */
import dgram from 'node:dgram';
import net from 'node:net';
import tls from 'node:tls';
import type { GatewayPlugin } from './registry.ts';
import { bodyLogProperties, loggerMetadataSchema, withBatchProperties } from './batch-schema.ts';
import { BatchProcessorManager } from './batch-processor.ts';
import type { BatchConf } from './batch-processor.ts';
import { bodyLogPhases, logEntry } from './log-entry.ts';
import type { BodyLogConf } from './log-entry.ts';

interface SyslogConf extends BatchConf, BodyLogConf {
  host: string; port: number; flush_limit: number; drop_limit: number; timeout: number;
  sock_type: 'tcp' | 'udp'; pool_size: number; tls: boolean;
}

const manager = new BatchProcessorManager('syslog');

/** <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA MSG: SYSLOG(5) × 8 + INFO(6) is 46. */
export function rfc5424(hostname: string | undefined, appname: string, pid: number, msg: string): string {
  return `<46>1 ${new Date().toISOString()} ${hostname || '-'} ${appname} ${pid} - - ${msg}\n`;
}

/** The socket logger of one conf: a byte buffer and, for TCP, the connection it reuses. */
class SocketLogger {
  private buffer: string[] = [];
  private size = 0;
  private socket: net.Socket | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private readonly conf: SyslogConf;

  constructor(conf: SyslogConf) {
    this.conf = conf;
  }

  /** logger:log: buffered below flush_limit, else flushed with what is buffered; refused over drop_limit. */
  log(msg: string): Promise<void> {
    const len = Buffer.byteLength(msg);
    const { flush_limit: flushLimit, drop_limit: dropLimit } = this.conf;
    if (len + this.size < flushLimit) {
      this.write(msg, len);
      return Promise.resolve();
    }
    if (len + this.size <= dropLimit) {
      this.write(msg, len);
      return this.flush();
    }
    const flushed = this.flush();
    if (len > dropLimit) return flushed.then(() => Promise.reject(new Error('message too long')));
    this.write(msg, len);
    return flushed;
  }

  private write(msg: string, len: number): void {
    this.buffer.push(msg);
    this.size += len;
  }

  /** One flush at a time, in order: what is buffered now goes in this one. */
  private flush(): Promise<void> {
    const data = this.buffer.join('');
    this.buffer = [];
    this.size = 0;
    this.flushing = this.flushing.catch(() => undefined).then(() => (this.conf.sock_type === 'udp' ? this.sendUdp(data) : this.sendTcp(data)));
    return this.flushing;
  }

  private sendUdp(data: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const s = dgram.createSocket(net.isIPv6(this.conf.host) ? 'udp6' : 'udp4');
      s.send(data, this.conf.port, this.conf.host, (e) => {
        s.close();
        if (e) reject(new Error(`failed to send data: ${e.message}`));
        else resolve();
      });
    });
  }

  private connect(): Promise<net.Socket> {
    if (this.socket && !this.socket.destroyed && this.socket.writable) return Promise.resolve(this.socket);
    const { host, port, timeout } = this.conf;
    return new Promise((resolve, reject) => {
      const ready = () => {
        s.off('error', fail);
        s.on('error', () => undefined);
        s.setTimeout(0);
        this.socket = s;
        resolve(s);
      };
      const fail = (e: Error) => reject(new Error(`failed to connect: ${e.message}`));
      const s: net.Socket = this.conf.tls
        ? tls.connect({ host, port, rejectUnauthorized: false, servername: net.isIP(host) ? undefined : host }, ready)
        : net.connect({ host, port }, ready);
      s.setTimeout(timeout, () => s.destroy(new Error('timeout')));
      s.once('error', fail);
      // what the server writes back is not read; a closed one is reconnected next time
      s.resume();
      s.unref();
    });
  }

  private async sendTcp(data: string): Promise<void> {
    const s = await this.connect();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => s.destroy(), this.conf.timeout);
      s.write(data, (e) => {
        clearTimeout(timer);
        if (e) {
          s.destroy();
          reject(new Error(`failed to send data: ${e.message}`));
        } else resolve();
      });
    });
  }
}

const loggers = new WeakMap<object, SocketLogger>();

export const syslog: GatewayPlugin<SyslogConf> = {
  name: 'syslog', version: 0.1, priority: 401,
  schema: withBatchProperties('sys logger', {
    type: 'object',
    properties: {
      host: { type: 'string' },
      port: { type: 'integer' },
      flush_limit: { type: 'integer', minimum: 1, default: 4096 },
      drop_limit: { type: 'integer', default: 1048576 },
      timeout: { type: 'integer', minimum: 1, default: 3000 },
      sock_type: { type: 'string', default: 'tcp', enum: ['tcp', 'udp'] },
      pool_size: { type: 'integer', minimum: 5, default: 5 },
      tls: { type: 'boolean', default: false },
      ...bodyLogProperties,
    },
    required: ['host', 'port'],
  }),
  metadataSchema: loggerMetadataSchema(),
  ...bodyLogPhases<SyslogConf>(),
  log(conf, ctx) {
    const entry = logEntry('syslog', conf, ctx);
    if (!entry) return;
    const pid = Number(ctx.variable('pid') ?? process.pid);
    const line = rfc5424(ctx.variable('host'), 'apisix', pid, JSON.stringify(entry));
    manager.add(conf, ctx, line, (lines) => {
      let logger = loggers.get(conf);
      if (!logger) loggers.set(conf, (logger = new SocketLogger(conf)));
      return logger.log((lines as string[]).join('')).catch((e: Error) => {
        throw new Error(`failed to log message${e.message}`);
      });
    });
  },
};
