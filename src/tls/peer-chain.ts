/**
 * The client's certificates as its handshake delivered them: the leaf and
 * the intermediates it sent (OpenSSL's SSL_get_peer_cert_chain on a
 * server), which the client certificate check builds its chain from — as
 * OpenSSL does for nginx, counting them against `ssl_verify_depth`.
 *
 * Every reader goes through here because of Node 24.21 (nodejs/node#65579):
 * the first `getPeerX509Certificate()` on a connection returns the leaf with
 * the sent chain linked through `issuerCertificate`, but takes those
 * certificates out of OpenSSL's own peer chain as it does; every later
 * `getPeerX509Certificate()` or `getPeerCertificate(true)` sees the leaf
 * alone. So the first answer is kept, per socket.
 */
import type { X509Certificate } from 'node:crypto';
import type { TLSSocket } from 'node:tls';

export interface PeerCertificates {
  readonly leaf: X509Certificate;
  /** The certificates the client sent after its own, in its order (none on a resumed session). */
  readonly sent: readonly X509Certificate[];
}

const bySocket = new WeakMap<TLSSocket, PeerCertificates | null>();

/** The client's certificate and the chain it sent (undefined when it sent none). */
export function peerCertificates(socket: TLSSocket): PeerCertificates | undefined {
  let known = bySocket.get(socket);
  if (known === undefined) {
    const leaf = socket.getPeerX509Certificate();
    known = null;
    if (leaf) {
      const sent: X509Certificate[] = [];
      // a client may send its chain in any order, with repeats: kept as it came, loops cut
      for (let c = leaf.issuerCertificate; c && sent.length < 32 && !sent.includes(c); c = c.issuerCertificate) sent.push(c);
      known = { leaf, sent };
    }
    bySocket.set(socket, known);
  }
  return known ?? undefined;
}
