/**
 * The TLS settings of one server block as the configuration wrote them
 * (nginx's ngx_http_ssl_srv_conf_t): the http ssl module's directives fill
 * them (src/http/modules/ssl/conf.ts), and ServerTls (server-tls.ts) turns
 * them into TLS contexts. They live here, below the module, so the TLS
 * layer does not depend on the module that configures it.
 */
import type { ComplexValue } from '../core/variables.ts';

export type VerifyMode = 'off' | 'on' | 'optional' | 'optional_no_ca';

export interface SessionCacheConf {
  /** `off` (no cache, nginx tells clients sessions are not reused) or `none` (the default). */
  off: boolean;
  /** Per-worker cache (`builtin[:size]`), in sessions. */
  builtin?: number;
  /** `shared:NAME:SIZE`: one cache for all workers. */
  shared?: { name: string; size: number };
}

/** A value as written, with where it was written (for error messages) and the conf dir. */
export interface PathValue {
  /** Resolved against the configuration directory (or a `data:` value). */
  path: string;
  /** Compiled when the value has variables. */
  complex?: ComplexValue;
  /** The configuration directory, for relative paths that come out of variables. */
  confPrefix?: string;
}

export interface SslSrvConf {
  certificates?: PathValue[];
  certificateKeys?: PathValue[];
  certificateCache?: { max: number; inactive: number; valid: number } | false;
  passwordFile?: string;
  /** The password file's text, read with the configuration. */
  passwordText?: string;
  dhparam?: string;
  ecdhCurve?: string;
  protocols?: string[];
  ciphers?: string;
  preferServerCiphers?: boolean;
  bufferSize?: number;
  verify?: VerifyMode;
  verifyDepth?: number;
  clientCertificate?: string;
  trustedCertificate?: string;
  crl?: string;
  sessionCache?: SessionCacheConf;
  sessionTickets?: boolean;
  sessionTicketKeys?: string[];
  /** Seconds. */
  sessionTimeout?: number;
  ocsp?: 'off' | 'on' | 'leaf';
  ocspResponder?: string;
  ocspCache?: { name: string; size: number } | false;
  stapling?: boolean;
  staplingFile?: string;
  staplingResponder?: string;
  staplingVerify?: boolean;
  earlyData?: boolean;
  confCommands?: Array<[string, string]>;
  rejectHandshake?: boolean;
  /** The obsolete `ssl on` (nginx ≤ 1.25.0): the server's addresses speak TLS. */
  enable?: boolean;
  /** Where `[warn]` lines found while compiling go (once, from the configuration reader). */
  warn?: (message: string) => void;
}
