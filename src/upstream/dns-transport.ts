/**
 * One resolver address as nginx talks to it (ngx_resolver_connection_t):
 * a UDP socket taking answers from that address only, and a TCP connection opened when an answer came
 * truncated, its messages framed by a 2-byte length. Both are unref'd and
 * reopened after an error.
 */
import dgram from 'node:dgram';
import net from 'node:net';

export type DnsResponseHandler = (msg: Buffer, tcp: boolean) => void;

export class DnsServer {
  readonly host: string;
  readonly port: number;
  private readonly onResponse: DnsResponseHandler;
  private udp: dgram.Socket | undefined;
  private tcp: net.Socket | undefined;
  private tcpIn: Buffer = Buffer.alloc(0);

  constructor(host: string, port: number, onResponse: DnsResponseHandler) {
    // the form answers come from
    this.host = net.isIPv6(host) ? new net.SocketAddress({ address: host, family: 'ipv6' }).address : host;
    this.port = port;
    this.onResponse = onResponse;
  }

  send(query: Buffer, overTcp: boolean): void {
    if (overTcp) this.sendTcp(query);
    else this.udpSocket().send(query, this.port, this.host);
  }

  close(): void {
    this.udp?.close();
    this.udp = undefined;
    this.tcp?.destroy();
    this.tcp = undefined;
  }

  private udpSocket(): dgram.Socket {
    if (this.udp) return this.udp;
    const s = dgram.createSocket(net.isIPv6(this.host) ? 'udp6' : 'udp4');
    // as nginx's connected socket: only this server's answers count
    s.on('message', (msg, from) => {
      if (from.port === this.port && from.address === this.host) this.onResponse(msg, false);
    });
    s.on('error', () => {
      // a new socket next time; the lookup waits for a resend
      if (this.udp === s) this.udp = undefined;
      s.close();
    });
    s.unref();
    this.udp = s;
    return s;
  }

  private sendTcp(query: Buffer): void {
    let s = this.tcp;
    if (!s) {
      const sock = net.connect({ host: this.host, port: this.port });
      sock.unref();
      this.tcpIn = Buffer.alloc(0);
      sock.on('data', (chunk: Buffer) => this.onTcpData(chunk));
      const drop = (): void => {
        if (this.tcp === sock) this.tcp = undefined;
        sock.destroy();
      };
      sock.on('error', drop);
      sock.on('end', drop);
      sock.on('close', drop);
      this.tcp = s = sock;
    }
    const framed = Buffer.allocUnsafe(2 + query.length);
    framed.writeUInt16BE(query.length, 0);
    query.copy(framed, 2);
    s.write(framed);
  }

  private onTcpData(chunk: Buffer): void {
    let buf = this.tcpIn.length ? Buffer.concat([this.tcpIn, chunk]) : chunk;
    while (buf.length >= 2) {
      const len = buf.readUInt16BE(0);
      if (buf.length < 2 + len) break;
      this.onResponse(buf.subarray(2, 2 + len), true);
      buf = buf.subarray(2 + len);
    }
    this.tcpIn = buf;
  }
}
