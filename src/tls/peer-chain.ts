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
  /** The certificates the client sent after its own, in its order (on a resumed session: those it sent before, if known here). */
  readonly sent: readonly X509Certificate[];
}

const bySocket = new WeakMap<TLSSocket, PeerCertificates | null>();

/**
 * The chains clients sent with their certificates, by the certificate's
 * fingerprint (this worker's last 1000): a resumed session has the client's
 * certificate but not its chain, and nginx reports the verdict of the full
 * handshake, which the same chain gives again.
 */
const sentByLeaf = new Map<string, X509Certificate[]>();
const REMEMBERED = 1000;

function remember(leaf: X509Certificate, sent: X509Certificate[]): void {
  sentByLeaf.delete(leaf.fingerprint256);
  if (sentByLeaf.size >= REMEMBERED) sentByLeaf.delete(sentByLeaf.keys().next().value as string);
  sentByLeaf.set(leaf.fingerprint256, sent);
}

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
      if (sent.length) remember(leaf, sent);
      else if (socket.isSessionReused()) sent.push(...(sentByLeaf.get(leaf.fingerprint256) ?? []));
      known = { leaf, sent };
    }
    bySocket.set(socket, known);
  }
  return known ?? undefined;
}
