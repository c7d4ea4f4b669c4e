/**
 * `access_log syslog:server=address[:port][,facility=…][,severity=…][,tag=…][,nohostname]`:
 * one UDP datagram per line with nginx's header (ngx_syslog_add_header):
 * `<PRI>Nov 22 10:00:00 hostname tag: line`. One socket per worker and
 * destination, closed when the configuration stops serving. node:dgram has
 * no unix datagram sockets, so `server=unix:…` is accepted and its lines
 * dropped, with a warning when the configuration is read.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import os from 'node:os';

const FACILITIES = ['kern', 'user', 'mail', 'daemon', 'auth', 'intern', 'lpr', 'news', 'uucp', 'clock', 'authpriv',
  'ftp', 'ntp', 'audit', 'alert', 'cron', 'local0', 'local1', 'local2', 'local3', 'local4', 'local5', 'local6', 'local7'];
const SEVERITIES = ['emerg', 'alert', 'crit', 'error', 'warn', 'notice', 'info', 'debug'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

const hostname = os.hostname();

let clockSecond = -1;
let clockText = '';

/** nginx's syslog time, `Nov  2 10:00:00` (day padded with a space), formatted once per second. */
function syslogTime(): string {
  const sec = Math.floor(Date.now() / 1000);
  if (sec !== clockSecond) {
    const d = new Date(sec * 1000);
    const two = (n: number) => (n < 10 ? `0${n}` : String(n));
    clockText = `${MONTHS[d.getMonth()]} ${String(d.getDate()).padStart(2, ' ')} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
    clockSecond = sec;
  }
  return clockText;
}

export class SyslogPeer {
  readonly host: string;
  readonly port: number;
  /** `server=unix:…`: lines are dropped (no unix datagram sockets in Node). */
  readonly unix: boolean;
  private readonly pri: number;
  private readonly prefix: string;
  private socket: dgram.Socket | undefined;
  private lastWarning = 0;
  /** Where a failed send is told (the main error log; given, since the error log itself sends through peers). */
  private readonly report: (msg: string) => void;

  /** `spec` is what follows `syslog:`, already checked as nginx checks it (checkSyslog). */
  constructor(spec: string, report: (msg: string) => void) {
    this.report = report;
    let server = '';
    let facility = 23;
    let severity = 6;
    let tag = 'nginx';
    let nohostname = false;
    for (const p of spec.split(',')) {
      const eq = p.indexOf('=');
      const key = eq < 0 ? p : p.slice(0, eq);
      const value = p.slice(eq + 1);
      if (key === 'server') server = value;
      else if (key === 'facility') facility = FACILITIES.indexOf(value);
      else if (key === 'severity') severity = SEVERITIES.indexOf(value);
      else if (key === 'tag') tag = value;
      else if (key === 'nohostname') nohostname = true;
    }
    this.unix = server.startsWith('unix:');
    const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(server);
    const colon = server.lastIndexOf(':');
    if (v6) { this.host = v6[1]; this.port = Number(v6[2] ?? 514); }
    else if (colon > 0 && !this.unix && net.isIPv6(server) === false) { this.host = server.slice(0, colon); this.port = Number(server.slice(colon + 1)); }
    else { this.host = server; this.port = 514; }
    this.pri = facility * 8 + severity;
    this.prefix = nohostname ? `${tag}: ` : `${hostname} ${tag}: `;
  }

  /** Sends one line (without its newline); `severity` replaces the configured one (error lines carry their level). */
  send(line: string, severity?: number): void {
    if (this.unix) return;
    if (!this.socket) {
      this.socket = dgram.createSocket(net.isIPv6(this.host) ? 'udp6' : 'udp4');
      this.socket.on('error', (e) => this.warn(e));
      this.socket.unref();
    }
    const pri = severity === undefined ? this.pri : this.pri - (this.pri & 7) + severity;
    const data = Buffer.from(`<${pri}>${syslogTime()} ${this.prefix}${line}`, 'latin1');
    this.socket.send(data, this.port, this.host, (e) => { if (e) this.warn(e); });
  }

  private warn(e: Error): void {
    const now = Date.now();
    if (now - this.lastWarning < 60_000) return;
    this.lastWarning = now;
    this.report(`send() to syslog failed (${(e as NodeJS.ErrnoException).code ?? e.message})`);
  }

  close(): void {
    this.socket?.close();
    this.socket = undefined;
  }
}
