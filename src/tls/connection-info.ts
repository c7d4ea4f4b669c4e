/**
 * What an HTTP connection knows about its TLS session: the handshake's
 * socket, the ClientHello read before it, the server block whose TLS
 * settings served it, and the client certificate verification result. The
 * $ssl_* variables read from here.
 */
import type { X509Certificate } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import type { ClientHello } from './client-hello.ts';
import type { ServerTls } from './server-tls.ts';
import type { ClientVerifyResult } from './verify.ts';

export interface TlsConnection {
  readonly socket: TLSSocket;
  readonly hello: ClientHello | undefined;
  /** The SNI name as sent ($ssl_server_name). */
  readonly serverName: string | undefined;
  /** The SNI name (lowercased) when it selected a server block (nginx's hc->ssl_servername). */
  readonly matchedName: string | undefined;
  /** The server block whose TLS context served the handshake. */
  readonly settings: ServerTls;
  /** Set once the handshake is done and the client certificate (if any) was checked. */
  verify: ClientVerifyResult | undefined;
  /**
   * Facts of the finished handshake, kept here because the socket forgets
   * them once destroyed, and an HTTP/2 stream may be logged after that.
   */
  readonly protocol: string;
  readonly cipher: string;
  readonly reused: boolean;
  /** The client's certificate (only asked for where clients are verified). */
  readonly peerCertificate: X509Certificate | undefined;
}
