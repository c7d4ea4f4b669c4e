/**
 * What the Admin API's handlers share: the request as they see it (no
 * HTTP objects: http-adapter.ts builds it), the answer they give, and the
 * gateway's state they work on.
 */
import type { Store } from '../store/store.ts';
import type { PluginRegistry } from '../plugins/registry.ts';
import type { Keyring } from '../data-encryption.ts';

export interface AdminRequest {
  method: string;
  /** The decoded path (`/gateway/admin/routes/1`). */
  path: string;
  args: URLSearchParams;
  /** Lowercased header names. */
  headers: Record<string, string | undefined>;
  /** The body as received, or undefined when there was none (or it is over the limit: see bodyLength). */
  body: Buffer | undefined;
  bodyLength: number;
}

export interface AdminResponse {
  status: number;
  /** Sent as JSON (with a trailing newline), or as is when a string. */
  body?: unknown;
  /** Adds `X-API-VERSION: v3` (answers of a resource handler, not the early errors). */
  apiVersion?: boolean;
  contentType?: string;
  headers?: Record<string, string>;
}

export interface AdminSettings {
  /** Storage key prefix: `/gateway` (APISIX: `/apisix`). */
  keyPrefix: string;
  /** apisix.proxy_mode: stream routes need `stream` or `http&stream`. */
  proxyMode: string;
  /** deployment.admin.admin_key_required. */
  keyRequired: boolean;
  /** deployment.admin.admin_key; undefined = no keys configured (every request accepted). */
  keys: Array<{ name?: string; key: string; role: string }> | undefined;
  enableCors: boolean;
  /** `Server` header value. */
  serverHeader: string;
  /** gatehouse.acme.issuers: the issuers an SSL object's `acme.issuer` may name. */
  acmeIssuers?: string[];
}

export interface AdminContext {
  store: Store;
  settings: AdminSettings;
  plugins: PluginRegistry;
  /** apisix.data_encryption: undefined when `enable_encrypt_fields` is off. */
  keyring: Keyring | undefined;
  /** Epoch seconds (create_time/update_time). */
  now(): number;
  /** Checks skip references to other objects (`/configs/validate`: APISIX's skip_references_check). */
  skipReferences?: boolean;
}

export const notFound = (): AdminResponse => ({ status: 404, body: { message: 'Key not found' }, apiVersion: true });
export const badRequest = (msg: string): AdminResponse => ({ status: 400, body: { error_msg: msg }, apiVersion: true });
export const unavailable = (msg: string): AdminResponse => ({ status: 503, body: { error_msg: msg }, apiVersion: true });
