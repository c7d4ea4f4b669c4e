/**
 * The server-side session cache hook-up. Node's TLS socket asks its
 * `server` object for sessions ('newSession' / 'resumeSession') and OCSP
 * staples ('OCSPRequest'); each server block gets one such hub.
 *
 * Node emits 'resumeSession' with the ClientHello's legacy session id. In
 * TLS 1.2 that is the session to resume; in TLS 1.3 the session travels as
 * a pre_shared_key identity (with tickets off, OpenSSL's stateful ticket is
 * the session id), which Node does not pass on — so the hub looks the
 * connection's ClientHello up (read before the handshake, see
 * client-hello.ts) and tries its PSK identities too.
 */
import { EventEmitter } from 'node:events';
import tls from 'node:tls';
import type { ClientHello } from './client-hello.ts';
import type { ServerTls } from './server-tls.ts';
import { MAX_SESSION_SIZE } from './session-cache.ts';

interface Hub extends EventEmitter {
  _sharedCreds: tls.SecureContext;
}

let placeholderContext: tls.SecureContext | undefined;

/**
 * The `server` object for one handshake with `settings` (one per
 * connection: the events carry no socket, so the hub holds the
 * connection's ClientHello itself); none when there is nothing to ask.
 */
export function sessionHub(settings: ServerTls, hello: ClientHello | undefined): EventEmitter | undefined {
  if (!settings.sessionStore && !settings.stapler) return undefined;
  const hub = new EventEmitter() as Hub;
  // Node reads a context from its server before asking for an OCSP staple; the staple itself comes from `settings`
  hub._sharedCreds = placeholderContext ??= tls.createSecureContext();
  const store = settings.sessionStore;
  if (store) {
    hub.on('newSession', (id: Buffer, session: Buffer, done: () => void) => {
      if (session.length <= MAX_SESSION_SIZE) store.set(id, session, Math.floor(Date.now() / 1000) + settings.conf.sessionTimeout);
      done();
    });
    hub.on('resumeSession', (id: Buffer, done: (err: Error | null, session?: Buffer) => void) => {
      let found = store.get(id);
      for (const psk of hello?.pskIdentities ?? []) {
        if (found) break;
        if (psk.length <= 64) found = store.get(psk);
      }
      done(null, found);
    });
  }
  const stapler = settings.stapler;
  if (stapler) {
    hub.on('OCSPRequest', (_cert: Buffer, _issuer: Buffer, done: (err: Error | null, resp?: Buffer) => void) => {
      done(null, stapler.stapleFor(hello));
    });
  }
  return hub;
}
