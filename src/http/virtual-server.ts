/**
 * Choosing the virtual server for a request (ngx_http_find_virtual_server):
 * the name table both subsystems share (src/core/server-names.ts), typed
 * for http's addresses and servers.
 */
import { conflictingNames as namesInConflict, selectServer as select } from '../core/server-names.ts';
import type { ServerMatch as Match } from '../core/server-names.ts';
import type { AddressConf, ServerConf } from './http-conf.ts';

export type ServerMatch = Match<ServerConf>;

/** The server for `host` (validated: lowercase, no port; '' when the request named none) on `addr`. */
export function selectServer(addr: AddressConf, host: string): ServerMatch {
  return select(addr, host);
}

/** Names a later server of `addr` claims after an earlier one did (nginx warns and ignores them). */
export function conflictingNames(addr: AddressConf): string[] {
  return namesInConflict(addr);
}
