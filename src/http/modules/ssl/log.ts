/**
 * Error log lines about a connection that has no request yet (the TLS
 * handshake), with nginx's suffix for them: `, client: ADDR, server: LISTEN`.
 */
import { ErrorLog, mainErrorLog } from '../../../core/error-log.ts';
import type { AddressServer } from '../../address-server.ts';
import type { HttpConnection } from '../../connection.ts';
import { coreLoc } from '../../core/settings.ts';

const logs = new WeakMap<object, ErrorLog>();

export function connectionLog(server: AddressServer, conn: HttpConnection, level: number, msg: string): void {
  const specs = server.addr.defaultServer.level.get(coreLoc).errorLogs;
  let log = mainErrorLog();
  if (specs) {
    log = logs.get(specs) ?? new ErrorLog(specs);
    logs.set(specs, log);
  }
  if (!log.enabled(level)) return;
  log.log(level, `${msg}, client: ${conn.remoteAddress}, server: ${server.addr.spec.key}`, conn.number);
}
