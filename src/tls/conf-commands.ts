/**
 * `ssl_conf_command` (and `proxy_ssl_conf_command`): OpenSSL's SSL_CONF_cmd
 * is not reachable from Node, so the commands that map onto what Node can
 * set are supported: `Options` (set and cleared before the context is
 * made), `Certificate` / `PrivateKey` (they replace the configured pair),
 * and the ones with a context setter (ciphers, groups, signature
 * algorithms, protocol bounds). Anything else is refused with OpenSSL's
 * message.
 */
import crypto from 'node:crypto';
import { ConfError } from '../conf/errors.ts';
import { diskFiles } from './load-files.ts';
import type { TlsFiles } from './load-files.ts';

const C = crypto.constants as unknown as Record<string, number>;

/** Options whose name says the opposite of the bit (`SessionTicket` clears SSL_OP_NO_TICKET). */
const INVERTED: Record<string, string> = {
  sessionticket: 'SSL_OP_NO_TICKET', compression: 'SSL_OP_NO_COMPRESSION', encryptthenmac: 'SSL_OP_NO_ENCRYPT_THEN_MAC',
  renegotiation: 'SSL_OP_NO_RENEGOTIATION',
};
const NAMED: Record<string, string> = {
  serverpreference: 'SSL_OP_CIPHER_SERVER_PREFERENCE', prioritizechacha: 'SSL_OP_PRIORITIZE_CHACHA',
  norenegotiation: 'SSL_OP_NO_RENEGOTIATION', nocompression: 'SSL_OP_NO_COMPRESSION',
};

function badValue(name: string, value: string): ConfError {
  return new ConfError(`SSL_CONF_cmd("${name}", "${value}") failed (SSL: error:0A000180:SSL routines::bad value)`);
}

/** `Options a,-b`: the option bits with the commands applied. */
export function applyOptions(commands: Array<[string, string]> | undefined, options: number): number {
  for (const [name, value] of commands ?? []) {
    if (name.toLowerCase() !== 'options') continue;
    for (const raw of value.split(',')) {
      const o = raw.trim();
      const off = o.startsWith('-');
      const key = o.replace(/^-/, '').toLowerCase();
      const inverted = INVERTED[key];
      const bitName = inverted ?? NAMED[key] ?? `SSL_OP_${o.replace(/^-/, '').replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase()}`;
      const bit = C[bitName];
      if (bit === undefined) throw badValue(name, value);
      options = (off !== (inverted !== undefined)) ? options & ~bit : options | bit;
    }
  }
  return options;
}

/** The `Certificate` and `PrivateKey` commands' files, read (undefined when not given). */
export function overridePair(commands: Array<[string, string]> | undefined, files: TlsFiles = diskFiles): { cert?: string; key?: string } {
  const out: { cert?: string; key?: string } = {};
  for (const [name, value] of commands ?? []) {
    const which = name.toLowerCase() === 'certificate' ? 'cert' : name.toLowerCase() === 'privatekey' ? 'key' : undefined;
    if (!which) continue;
    try {
      out[which] = files.text(value);
    } catch {
      throw badValue(name, value);
    }
  }
  return out;
}

/** What a context exposes for the remaining commands (Node's native SecureContext). */
export interface NativeContext {
  setCiphers(list: string): void;
  setCipherSuites(list: string): void;
  setSessionIdContext(id: string): void;
  setECDHCurve(list: string): void;
  setSigalgs(list: string): void;
  setMinProto(v: number): void;
  setMaxProto(v: number): void;
  setOptions(o: number): void;
}

const PROTO_NUMBER: Record<string, number> = { 'TLSv1': 0x301, 'TLSv1.1': 0x302, 'TLSv1.2': 0x303, 'TLSv1.3': 0x304 };

/** The commands applied on a made context (Options, Certificate and PrivateKey were applied before). */
export function applyConfCommands(native: NativeContext, commands: Array<[string, string]> | undefined): void {
  for (const [name, value] of commands ?? []) {
    const setter = (): (() => void) | undefined => {
      switch (name.toLowerCase()) {
        case 'options': case 'certificate': case 'privatekey': return () => undefined;
        case 'ciphersuites': return () => native.setCipherSuites(value);
        case 'cipherstring': return () => native.setCiphers(value);
        case 'groups': case 'curves': return () => native.setECDHCurve(value);
        case 'signaturealgorithms': return () => native.setSigalgs(value);
        case 'minprotocol': return () => native.setMinProto(PROTO_NUMBER[value] ?? 0);
        case 'maxprotocol': return () => native.setMaxProto(PROTO_NUMBER[value] ?? 0);
      }
      return undefined;
    };
    const run = setter();
    if (!run) throw new ConfError(`SSL_CONF_cmd("${name}", "${value}") failed (SSL: error:0A000181:SSL routines::unknown cmd name:cmd=${name})`);
    try {
      run();
    } catch {
      throw badValue(name, value);
    }
  }
}
